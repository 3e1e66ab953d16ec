"""Keypoint correspondence by nearest-neighbour matching of frozen patch
features, scored as PCK (the zero-shot semantic-correspondence protocol of
SPair-71k as used by Probe3D, El Banani et al. 2024, and DINOv2/v3-era
papers):

* the feature of a source keypoint is the source patch-feature map sampled
  bilinearly at the keypoint (patch ``j`` of ``w`` covers ``[j, j + 1) W /
  w``, its feature sits at the centre);
* its match is the target patch of largest cosine similarity; the
  predicted target keypoint is that patch's centre;
* a prediction is correct when it lies within ``alpha * max(h_box,
  w_box)`` of the annotated target keypoint (``by='bbox'``: the target's
  bounding box, SPair-71k's convention) or ``alpha * max(H, W)`` of the
  target image (``by='image'``); PCK@alpha is the percentage of correct
  keypoints over all pairs (``alpha`` 0.05 and 0.1).

Keypoints are continuous pixel coordinates ``(x, y)`` with the image's top
left corner at ``(0, 0)`` (pixel ``i`` covers ``[i, i + 1)``).

SPair-71k's layout (:func:`read_spair_pairs`): ``PairAnnotation/<split>/
<pair>.json`` (``trn``, ``val``, ``test``) with ``category``,
``src_imname``, ``trg_imname``, ``src_kps`` / ``trg_kps`` (``[[x, y],
...]``, corresponding in order), ``src_bndbox`` / ``trg_bndbox`` (``[x1,
y1, x2, y2]``); images in ``JPEGImages/<category>/<imname>``.
"""
import glob
import json
import os.path as osp
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from mmpos.utils.errors import BadInputError

SPAIR_KEYS = ('category', 'src_imname', 'trg_imname', 'src_kps', 'trg_kps',
              'src_bndbox', 'trg_bndbox')
PCK_ALPHAS = (0.05, 0.1)


def sample_features(feats: Tensor, points: Tensor,
                    image_hw: Sequence[int]) -> Tensor:
    """Features ``(K, C)`` of the map ``feats`` ``(C, h, w)`` at ``points``
    ``(K, 2)`` (pixel ``(x, y)`` of an ``image_hw`` image), bilinear."""
    height, width = image_hw
    grid = torch.stack([points[:, 0] / width * 2 - 1,
                        points[:, 1] / height * 2 - 1], -1)
    out = F.grid_sample(feats[None].float(), grid[None, None].float(),
                        mode='bilinear', padding_mode='border',
                        align_corners=False)
    return out[0, :, 0].T


def patch_centres(grid_hw: Sequence[int], image_hw: Sequence[int]) -> Tensor:
    """Pixel ``(x, y)`` of the centres of a ``grid_hw`` patch grid over an
    ``image_hw`` image, row-major ``(h * w, 2)``."""
    (h, w), (height, width) = grid_hw, image_hw
    ys, xs = torch.meshgrid((torch.arange(h) + 0.5) * height / h,
                            (torch.arange(w) + 0.5) * width / w,
                            indexing='ij')
    return torch.stack([xs.flatten(), ys.flatten()], -1)


def match_keypoints(src_feats: Tensor, trg_feats: Tensor, src_kps: Tensor,
                    src_hw: Sequence[int], trg_hw: Sequence[int]) -> Tensor:
    """Predicted target keypoints ``(K, 2)`` of source keypoints ``(K, 2)``
    by nearest-neighbour (cosine) matching of ``src_feats`` ``(C, h, w)``
    sampled at them against every patch of ``trg_feats`` ``(C, h', w')``."""
    query = F.normalize(sample_features(src_feats, src_kps, src_hw), dim=1)
    keys = F.normalize(trg_feats.float().flatten(1).T, dim=1)
    best = (query @ keys.T).argmax(dim=1)
    return patch_centres(trg_feats.shape[-2:], trg_hw)[best]


def pck_threshold(bbox: Optional[Sequence[float]],
                  image_hw: Sequence[int], by: str = 'bbox') -> float:
    """``max(h, w)`` of the bounding box ``[x1, y1, x2, y2]``
    (``by='bbox'``) or of the image (``by='image'``)."""
    if by == 'image':
        return float(max(image_hw))
    if by != 'bbox':
        raise BadInputError(f"PCK threshold by 'bbox' or 'image', got {by!r}")
    x1, y1, x2, y2 = bbox
    return float(max(x2 - x1, y2 - y1))


def pck_hits(pred: Tensor, gt: Tensor, threshold: float,
             alphas: Sequence[float] = PCK_ALPHAS) -> Dict[float, Tensor]:
    """Per alpha, whether each predicted keypoint ``(K, 2)`` lies within
    ``alpha * threshold`` of its ground truth ``(K, 2)`` (boolean ``(K,)``).
    """
    dist = (pred.float() - gt.float()).norm(dim=1)
    return {a: dist <= a * threshold for a in alphas}


def pck(hits: Sequence[Dict[float, Tensor]]) -> Dict[str, float]:
    """PCK in percent over all keypoints of all pairs (``pck@0.1`` ...)
    from :func:`pck_hits` of each pair."""
    if not hits:
        raise BadInputError('PCK of no keypoint pairs')
    return {f'pck@{a:g}': 100. * torch.cat([h[a] for h in hits]).float(
    ).mean().item() for a in hits[0]}


def read_spair_pairs(root: str, split: str = 'test',
                     categories: Optional[Sequence[str]] = None
                     ) -> List[dict]:
    """The keypoint pairs of SPair-71k's layout under ``root``.

    Returns:
        list[dict]: per pair (sorted by file name): ``name``, ``category``,
        ``src_img`` / ``trg_img`` (paths), ``src_kps`` / ``trg_kps``
        (float ``(K, 2)``), ``src_bbox`` / ``trg_bbox`` (``[x1, y1, x2,
        y2]``).
    """
    folder = osp.join(root, 'PairAnnotation', split)
    files = sorted(glob.glob(osp.join(folder, '*.json')))
    if not files:
        raise FileNotFoundError(f'{folder}: no SPair-71k pair files '
                                '(PairAnnotation/<split>/*.json)')
    pairs = []
    for path in files:
        with open(path) as f:
            ann = json.load(f)
        missing = [k for k in SPAIR_KEYS if k not in ann]
        if missing:
            raise BadInputError(f'{path}: no key {missing[0]!r}')
        if categories and ann['category'] not in categories:
            continue
        src, trg = (torch.tensor(ann[k], dtype=torch.float32).reshape(-1, 2)
                    for k in ('src_kps', 'trg_kps'))
        if src.shape != trg.shape or not len(src):
            raise BadInputError(f'{path}: src_kps {tuple(src.shape)} and '
                                f'trg_kps {tuple(trg.shape)} do not pair up')
        image_dir = osp.join(root, 'JPEGImages', ann['category'])
        pairs.append(dict(
            name=osp.splitext(osp.basename(path))[0],
            category=ann['category'],
            src_img=osp.join(image_dir, ann['src_imname']),
            trg_img=osp.join(image_dir, ann['trg_imname']),
            src_kps=src, trg_kps=trg,
            src_bbox=list(ann['src_bndbox']),
            trg_bbox=list(ann['trg_bndbox'])))
    if not pairs:
        raise BadInputError(f'{folder}: no pair of categories {categories}')
    return pairs


def correspondence_pck(pairs: Sequence[dict], src_feats: Sequence[Tensor],
                       trg_feats: Sequence[Tensor],
                       image_hws: Sequence[Tuple[Tuple[int, int],
                                                 Tuple[int, int]]],
                       by: str = 'bbox',
                       alphas: Sequence[float] = PCK_ALPHAS
                       ) -> Tuple[Dict[str, float], List[Tensor]]:
    """PCK of nearest-neighbour matching over ``pairs``.

    Args:
        pairs: :func:`read_spair_pairs` entries (keypoints and boxes in the
            original image pixels).
        src_feats, trg_feats: per pair, the patch-feature maps ``(C, h,
            w)`` of the source and target image.
        image_hws: per pair, the original ``(H, W)`` of source and target.
        by: PCK threshold from the target's ``'bbox'`` or ``'image'``.

    Returns:
        ``({'pck@0.05': %, 'pck@0.1': %}, predicted target keypoints per
        pair)``.
    """
    hits, preds = [], []
    for pair, src, trg, (src_hw, trg_hw) in zip(pairs, src_feats, trg_feats,
                                                image_hws):
        pred = match_keypoints(src, trg, pair['src_kps'], src_hw, trg_hw)
        preds.append(pred)
        hits.append(pck_hits(pred, pair['trg_kps'], pck_threshold(
            pair['trg_bbox'], trg_hw, by), alphas))
    return pck(hits), preds


# ``correspondence_probe`` of a probe config.
CORRESPONDENCE_PROBE = dict(split='test', size=448, by='bbox',
                            alphas=PCK_ALPHAS)


def pair_features(backbone, pairs: Sequence[dict], size, mean, std,
                  batch_size: int = 32, device='cpu'):
    """Last-output patch maps of every pair's source and target image
    (resized to ``size``) and the images' original ``(H, W)``: ``(src
    feats, trg feats, hws)`` as :func:`correspondence_pck` takes them."""
    from PIL import Image

    from .dense import split_features
    paths = [p['src_img'] for p in pairs] + [p['trg_img'] for p in pairs]
    feats = split_features(backbone, paths, size, mean, std, batch_size,
                           device)['patch'][-1]
    sizes = []
    for path in paths:
        with Image.open(path) as img:
            sizes.append((img.height, img.width))
    num = len(pairs)
    return (list(feats[:num]), list(feats[num:]),
            list(zip(sizes[:num], sizes[num:])))
