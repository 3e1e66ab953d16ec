"""Keypoint correspondence by nearest-neighbour matching of frozen patch
features, scored as PCK per category and viewpoint-variation bin (the
zero-shot semantic-correspondence protocol of SPair-71k, Min et al. 2019,
as Probe3D evaluates it, El Banani et al. CVPR 2024):

* the feature of a source keypoint is the source patch-feature map sampled
  bilinearly at the keypoint (patch ``j`` of ``w`` covers ``[j, j + 1) W /
  w``, its feature sits at the centre; :func:`sample_features`);
* the target patch-feature map is upsampled bilinearly by ``upsample``
  (the same sampling at the centres of a ``(upsample h) x (upsample w)``
  grid) and the predicted target keypoint is the centre of the cell of
  largest cosine similarity, clamped to the outermost patch centres
  (:func:`match_keypoints`): below the patch, so that a feature that
  identifies each point reaches ~100% PCK@0.05; ``upsample=1`` is the
  patch centre;
* a prediction is correct when its distance to the annotated target
  keypoint is *below* ``alpha * max(h_box, w_box)`` of the target's
  bounding box (``by='bbox'``) or ``alpha * max(H, W)`` of the target image
  (``by='image'``) (:func:`pck_hits`);
* PCK@alpha (:func:`spair_pck`) is computed per category over all
  keypoints of its pairs, per category and ``viewpoint_variation`` bin
  (SPair's 0 / 1 / 2), and reported as the mean over categories (overall
  and per bin), as Probe3D reports it; the PCK over all keypoints pooled
  is reported beside it. :func:`identity_baseline` scores, with the same
  code, the image-free prediction "every keypoint stays where it was".

Facts of the references (read, not copied):

* SPair-71k (the paper and the HPF/CHM-lineage evaluation code): threshold
  ``alpha * max(w_bbox, h_bbox)`` of the target box ``[x1, y1, x2, y2]``
  (``max(x2 - x1, y2 - y1)``), correct where the distance is ``<=`` it
  (``torch.le``).
* Probe3D (``mbanani/probe3d`` at a1f1464:
  ``evaluate_spair_correspondence.py``, ``evals/datasets/spair.py``,
  ``configs/spair_correspondence.yaml``, ``use_bbox: False``): both images
  padded to a square and resized to 800 px; keypoints from
  ``ImageAnnotation``, kept where they are annotated (not ``null``) in
  both images; the source feature is
  the L2-normalised map sampled bilinearly (``align_corners=True``, zero
  padding); the prediction is the arg-max patch, as its index divided by
  the grid size (the patch's top-left corner) -- no localisation below the
  patch; the error in pixels over ``max(w_bbox, h_bbox)`` of the target
  box is correct where it is ``< 0.1`` (strict); recall per category and
  ``viewpoint_variation`` in {0, 1, 2, all}, over at most 200 pairs of each
  (shuffled with seed 20); reported: the mean over the categories that have
  pairs, per bin and overall.

Ours follows Probe3D's code where the two references differ (strict
``<``), and differs from it, on purpose: the prediction is localised
below the patch at the centre of an upsampled cell (Probe3D: the patch's
corner); keypoints come from the pair files (``src_kps`` / ``trg_kps``,
those marked missing in either image dropped); images are resized to
``size`` without padding; sampling uses
``align_corners=False`` with border padding; every pair is scored (no 200
pair sample); a category whose pairs hold no keypoint is left out of the
means (Probe3D's mean of no keypoint is NaN).

Keypoints are continuous pixel coordinates ``(x, y)`` with the image's top
left corner at ``(0, 0)`` (pixel ``i`` covers ``[i, i + 1)``).

SPair-71k's layout (:func:`read_spair_pairs`): ``PairAnnotation/<split>/
<pair>.json`` (``trn``, ``val``, ``test``) with ``category``,
``src_imname``, ``trg_imname``, ``src_kps`` / ``trg_kps`` (``[[x, y],
...]``, corresponding in order; ``null`` or ``[-1, -1]`` marks a keypoint
missing in that image), ``src_bndbox`` / ``trg_bndbox`` (``[x1, y1, x2,
y2]``) and, optional, ``viewpoint_variation``; images in
``JPEGImages/<category>/<imname>``.
"""
import glob
import json
import os.path as osp
from collections import defaultdict
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from mmpos.errors import BadInputError

SPAIR_KEYS = ('category', 'src_imname', 'trg_imname', 'src_kps', 'trg_kps',
              'src_bndbox', 'trg_bndbox')
PCK_ALPHAS = (0.05, 0.1)
# SPair-71k's viewpoint_variation values (small, medium, large).
VIEWPOINT_BINS = (0, 1, 2)
# Cells per patch side of the matcher's upsampled target map: a quarter
# patch (4 px of a 448 px input at patch 16, about 1% of the image).
UPSAMPLE = 4
# ``correspondence_probe`` of a probe config.
CORRESPONDENCE_PROBE = dict(split='test', size=448, by='bbox',
                            alphas=PCK_ALPHAS, upsample=UPSAMPLE)
ImageHWs = Sequence[Tuple[Tuple[int, int], Tuple[int, int]]]


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
                    src_hw: Sequence[int], trg_hw: Sequence[int],
                    upsample: int = UPSAMPLE) -> Tensor:
    """Predicted target keypoints ``(K, 2)`` of source keypoints ``(K, 2)``.

    ``src_feats`` ``(C, h, w)`` sampled at the keypoints
    (:func:`sample_features`) is matched by cosine similarity to every cell
    of ``trg_feats`` ``(C, h', w')`` upsampled bilinearly to ``(upsample
    h', upsample w')`` cells (``align_corners=False``: each cell's feature
    is the map sampled at its centre, borders clamped); the prediction is
    the best cell's centre in ``trg_hw`` pixels, clamped to the outermost
    patch centres (a cell in the outer half patch holds, the border being
    clamped, the feature of that centre). ``upsample=1``: the patch
    centres. Memory: ``C x upsample^2 h' w'`` floats.
    """
    if int(upsample) != upsample or upsample < 1:
        raise BadInputError(f'upsample must be an integer >= 1, got '
                            f'{upsample!r}')
    query = F.normalize(sample_features(src_feats, src_kps, src_hw), dim=1)
    cells = trg_feats.float()
    if upsample > 1:
        cells = F.interpolate(cells[None], scale_factor=int(upsample),
                              mode='bilinear', align_corners=False)[0]
    keys = F.normalize(cells.flatten(1).T, dim=1)
    best = (query @ keys.T).argmax(dim=1)
    corners = patch_centres(trg_feats.shape[-2:], trg_hw)[[0, -1]]
    return patch_centres(cells.shape[-2:], trg_hw)[best].clamp(
        corners[0], corners[1])


def pck_threshold(bbox: Optional[Sequence[float]],
                  image_hw: Sequence[int], by: str = 'bbox') -> float:
    """``max(h, w)`` of the bounding box ``[x1, y1, x2, y2]``
    (``by='bbox'``: ``max(x2 - x1, y2 - y1)``, SPair-71k / Probe3D) or of
    the image (``by='image'``); an empty box is an error."""
    if by == 'image':
        return float(max(image_hw))
    if by != 'bbox':
        raise BadInputError(f"PCK threshold by 'bbox' or 'image', got {by!r}")
    x1, y1, x2, y2 = bbox
    side = float(max(x2 - x1, y2 - y1))
    if not side > 0:
        raise BadInputError(f'PCK threshold of an empty box {list(bbox)}')
    return side


def pck_hits(pred: Tensor, gt: Tensor, threshold: float,
             alphas: Sequence[float] = PCK_ALPHAS) -> Dict[float, Tensor]:
    """Per alpha, whether each predicted keypoint ``(K, 2)`` lies strictly
    within ``alpha * threshold`` of its ground truth ``(K, 2)`` (boolean
    ``(K,)``): ``distance / threshold < alpha``, Probe3D's comparison
    (SPair's HPF-lineage code has ``<=``)."""
    ratio = (pred.double() - gt.double()).norm(dim=1) / threshold
    return {a: ratio < a for a in alphas}


def pck(hits: Sequence[Dict[float, Tensor]]) -> Dict[str, float]:
    """PCK in percent over all keypoints of all pairs (``pck@0.1`` ...)
    from :func:`pck_hits` of each pair."""
    if not hits or not sum(len(h[next(iter(h))]) for h in hits):
        raise BadInputError('PCK of no keypoint pairs')
    return {f'pck@{a:g}': 100. * torch.cat([h[a] for h in hits]).double(
    ).mean().item() for a in hits[0]}


def spair_pck(pairs: Sequence[dict], preds: Sequence[Tensor],
              trg_hws: Sequence[Sequence[int]], by: str = 'bbox',
              alphas: Sequence[float] = PCK_ALPHAS) -> Dict[str, float]:
    """PCK of predicted target keypoints, per category and viewpoint bin.

    Args:
        pairs: :func:`read_spair_pairs` entries (``category``, ``trg_kps``
            ``(K, 2)``, ``trg_bbox``, ``viewpoint_variation`` or ``None``).
        preds: per pair, the predicted target keypoints ``(K, 2)``.
        trg_hws: per pair, the target image's ``(H, W)``.
        by: threshold from the target's ``'bbox'`` or ``'image'``.

    Returns:
        Percentages, per alpha ``a``: ``pck@a`` -- the mean over categories
        of each category's PCK over all keypoints of its pairs (Probe3D's
        reported number); ``pck@a/vp<b>`` -- the same within
        ``viewpoint_variation`` ``b`` (categories with keypoints in the
        bin; absent where none has); ``pck@a/category/<name>``;
        ``pck@a/keypoints`` -- over all keypoints pooled. Categories whose
        pairs hold no keypoint are in no mean.
    """
    if not len(pairs) == len(preds) == len(trg_hws):
        raise BadInputError(f'{len(pairs)} pairs, {len(preds)} predictions '
                            f'and {len(trg_hws)} image sizes')
    groups = defaultdict(list)  # (category, bin or None) -> hits
    for pair, pred, trg_hw in zip(pairs, preds, trg_hws):
        if pred.shape != pair['trg_kps'].shape:
            raise BadInputError(
                f'pair {pair.get("name", "?")}: {tuple(pred.shape)} '
                f'predictions of {tuple(pair["trg_kps"].shape)} keypoints')
        hits = pck_hits(pred, pair['trg_kps'], pck_threshold(
            pair['trg_bbox'], trg_hw, by), alphas)
        groups[pair['category'], None].append(hits)
        vp = pair.get('viewpoint_variation')
        if vp is not None:
            if vp not in VIEWPOINT_BINS:
                raise BadInputError(
                    f'pair {pair.get("name", "?")}: viewpoint_variation '
                    f'{vp!r}, not one of SPair\'s {VIEWPOINT_BINS}')
            groups[pair['category'], vp].append(hits)
    rates = {key: pck(hits) for key, hits in groups.items()
             if sum(len(h[alphas[0]]) for h in hits)}
    if not rates:
        raise BadInputError('PCK of no keypoint pairs')
    metrics = {}
    for name in rates[next(iter(rates))]:  # pck@<alpha>
        for vp in (None, ) + VIEWPOINT_BINS:
            values = [r[name] for (_, b), r in rates.items() if b == vp]
            if values:
                metrics[name + ('' if vp is None else f'/vp{vp}')] = sum(
                    values) / len(values)
        for category in sorted(c for c, b in rates if b is None):
            metrics[f'{name}/category/{category}'] = rates[category,
                                                           None][name]
    metrics.update({f'{k}/keypoints': v for k, v in pck(
        [h for (_, vp), hits in groups.items() if vp is None
         for h in hits]).items()})
    return metrics


def identity_baseline(pairs: Sequence[dict], image_hws: ImageHWs,
                      by: str = 'bbox', alphas: Sequence[float] = PCK_ALPHAS
                      ) -> Tuple[Dict[str, float], List[Tensor]]:
    """The image-free baseline: every target keypoint predicted where the
    source keypoint is, scaled to the target image size (``x W_t / W_s``,
    ``y H_t / H_s``), scored by :func:`spair_pck`.

    Args:
        pairs: :func:`read_spair_pairs` entries.
        image_hws: per pair, the ``(H, W)`` of source and target.

    Returns:
        ``(metrics of spair_pck, predicted target keypoints (K, 2) per
        pair)``, as :func:`correspondence_pck`.
    """
    preds = [pair['src_kps'].double() * torch.tensor(
        [trg_hw[1] / src_hw[1], trg_hw[0] / src_hw[0]], dtype=torch.float64)
             for pair, (src_hw, trg_hw) in zip(pairs, image_hws)]
    return spair_pck(pairs, preds, [hw[1] for hw in image_hws], by,
                     alphas), preds


def _keypoints(entries, path: str, key: str) -> Tuple[Tensor, Tensor]:
    """``(K, 2)`` float keypoints of an annotation list and ``(K,)``
    whether each is annotated (``null`` and ``[-1, -1]`` mark it missing;
    a missing one is NaN)."""
    try:
        points = torch.tensor([[float('nan')] * 2 if p is None else p
                               for p in entries],
                              dtype=torch.float64).reshape(-1, 2)
    except (TypeError, ValueError, RuntimeError) as err:
        raise BadInputError(f'{path}: {key} is not a list of [x, y] or '
                            f'null ({err})') from None
    present = ~(points.isnan().any(1) | (points == -1).all(1))
    points[~present] = float('nan')
    return points, present


def read_spair_pairs(root: str, split: str = 'test',
                     categories: Optional[Sequence[str]] = None
                     ) -> List[dict]:
    """The keypoint pairs of SPair-71k's layout under ``root``.

    A keypoint missing in either image (``null`` or ``[-1, -1]``) is left
    out of the pair (as Probe3D keeps the keypoints annotated in both); a
    pair may be left with none. Keypoints outside the image are kept and
    scored (as Probe3D does).

    Returns:
        list[dict]: per pair (sorted by file name): ``name``, ``category``,
        ``src_img`` / ``trg_img`` (paths), ``src_kps`` / ``trg_kps``
        (float ``(K, 2)``), ``src_bbox`` / ``trg_bbox`` (``[x1, y1, x2,
        y2]``), ``viewpoint_variation`` (int, ``None`` where the file has
        none), ``missing`` (keypoints left out).
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
        (src, src_in), (trg, trg_in) = (_keypoints(ann[k], path, k)
                                        for k in ('src_kps', 'trg_kps'))
        if src.shape != trg.shape:
            raise BadInputError(f'{path}: src_kps {tuple(src.shape)} and '
                                f'trg_kps {tuple(trg.shape)} do not pair up')
        both = src_in & trg_in
        vp = ann.get('viewpoint_variation')
        image_dir = osp.join(root, 'JPEGImages', ann['category'])
        pairs.append(dict(
            name=osp.splitext(osp.basename(path))[0],
            category=ann['category'],
            src_img=osp.join(image_dir, ann['src_imname']),
            trg_img=osp.join(image_dir, ann['trg_imname']),
            src_kps=src[both].float(), trg_kps=trg[both].float(),
            src_bbox=list(ann['src_bndbox']),
            trg_bbox=list(ann['trg_bndbox']),
            viewpoint_variation=None if vp is None else int(vp),
            missing=int((~both).sum())))
    if not pairs:
        raise BadInputError(f'{folder}: no pair of categories {categories}')
    return pairs


def correspondence_pck(pairs: Sequence[dict], src_feats: Sequence[Tensor],
                       trg_feats: Sequence[Tensor], image_hws: ImageHWs,
                       by: str = 'bbox',
                       alphas: Sequence[float] = PCK_ALPHAS,
                       upsample: int = UPSAMPLE
                       ) -> Tuple[Dict[str, float], List[Tensor]]:
    """PCK of nearest-neighbour matching (:func:`match_keypoints`) over
    ``pairs``.

    Args:
        pairs: :func:`read_spair_pairs` entries (keypoints and boxes in the
            original image pixels).
        src_feats, trg_feats: per pair, the patch-feature maps ``(C, h,
            w)`` of the source and target image.
        image_hws: per pair, the original ``(H, W)`` of source and target.
        by: PCK threshold from the target's ``'bbox'`` or ``'image'``.
        upsample: cells per patch side of the target map searched.

    Returns:
        ``(metrics of spair_pck, predicted target keypoints (K, 2) per
        pair)``.
    """
    preds = [match_keypoints(src, trg, pair['src_kps'], src_hw, trg_hw,
                             upsample)
             for pair, src, trg, (src_hw, trg_hw) in zip(
                 pairs, src_feats, trg_feats, image_hws)]
    return spair_pck(pairs, preds, [hw[1] for hw in image_hws], by,
                     alphas), preds


def pair_image_hws(pairs: Sequence[dict]) -> List[Tuple[Tuple[int, int],
                                                        Tuple[int, int]]]:
    """Per pair, the ``(H, W)`` of its source and target image files."""
    from PIL import Image
    sizes = []
    for pair in pairs:
        hws = []
        for path in (pair['src_img'], pair['trg_img']):
            with Image.open(path) as img:
                hws.append((img.height, img.width))
        sizes.append(tuple(hws))
    return sizes


def pair_features(backbone, pairs: Sequence[dict], size, mean, std,
                  batch_size: int = 32, device='cpu'):
    """Last-output patch maps of every pair's source and target image
    (resized to ``size``) and the images' original ``(H, W)``: ``(src
    feats, trg feats, hws)`` as :func:`correspondence_pck` takes them."""
    from .dense import split_features
    paths = [p['src_img'] for p in pairs] + [p['trg_img'] for p in pairs]
    feats = split_features(backbone, paths, size, mean, std, batch_size,
                           device)['patch'][-1]
    num = len(pairs)
    return list(feats[:num]), list(feats[num:]), pair_image_hws(pairs)
