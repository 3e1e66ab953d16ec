"""Patch-feature maps of a frozen RoPE ViT on NaFlex batches, for the dense
probes that take one map per image: keypoint correspondence
(:func:`~mmpos.evaluation.correspondence.correspondence_pck` matches each
pair's maps, whatever their grids), in-context dense retrieval
(:func:`~mmpos.evaluation.dense_retrieval.augmented_memory` and
:func:`~mmpos.evaluation.dense_retrieval.retrieval_miou` with
``max_tokens``), the linear segmentation probe
(:class:`~mmpos.evaluation.seg_probe.NaFlexEncoderDecoder`) and the
linear depth probe (:mod:`~mmpos.evaluation.depth_probe`). Each image is
resized at its own aspect ratio to the largest grid of at most
``max_tokens`` patches (:class:`~mmpos.datasets.transforms.NaFlexResize`,
timm's rule) instead of to one square, the batch padded with a key mask
(:func:`~mmpos.datasets.naflex.naflex_batch`), and the tokens of every
output split back into one ``(C, h_i, w_i)`` map per image
(:func:`~mmpos.models.backbones.rope_vit.naflex_featmaps`). The map's
patch centres cover the original image as a square resize's do
(:func:`~mmpos.evaluation.correspondence.patch_centres`), with the
image's aspect ratio kept. Where a square probe resizes the labels to
the square (retrieval; the depths of the depth probe), they are resized
(nearest) to each image's NaFlex size (:func:`naflex_targets`); where it
upsamples its output to the labels (the linear segmentation probe,
mmseg's; the depth probe, to the resized depths), each image's output is
upsampled to its own map.
"""
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

from mmpos.apis.features import read_images
from mmpos.datasets.naflex import NaFlexDataPreprocessor, naflex_batch
from mmpos.datasets.transforms import NaFlexResize, naflex_size
from mmpos.errors import BadInputError, UnsupportedModelError
from mmpos.models.backbones.rope_vit import naflex_featmaps
from .frozen import with_progress


def naflex_inputs(images: Sequence[np.ndarray], patch_size: int,
                  max_tokens: Optional[int], mean: Sequence[float],
                  std: Sequence[float]) -> Dict[str, Tensor]:
    """uint8 RGB arrays ``(H, W, 3)`` -> a normalised NaFlex batch
    (``patches``, ``patch_coord``, ``patch_valid``), each image resized at
    its aspect ratio within ``max_tokens`` patches (bicubic); ``None``: the
    images as they are (sides multiples of the patch, e.g. already at
    their NaFlex size)."""
    if max_tokens is not None:
        resize = NaFlexResize(patch_size, max_tokens)
        images = [resize(dict(img=img))['img'] for img in images]
    batch = naflex_batch(images, patch_size)
    return NaFlexDataPreprocessor(mean, std)(dict(inputs=batch))['inputs']


def naflex_patch(backbone) -> Tuple[int, int]:
    """``(p_h, p_w)`` of a backbone's ``patch_size`` (an int or a pair:
    the RoPE ViT's pair, the raw pixels' int)."""
    size = backbone.patch_size
    return (size, size) if isinstance(size, int) else tuple(size)


def check_naflex_backbone(backbone) -> None:
    """Refuse, in one line, a backbone that cannot give NaFlex maps (a
    RoPE ViT with ``out_type='raw'`` can)."""
    if not hasattr(backbone, 'forward_naflex') or \
            getattr(backbone, 'out_type', None) != 'raw':
        raise UnsupportedModelError(
            f'{type(backbone).__name__}: NaFlex features need a RoPE ViT '
            "with out_type='raw' (init_backbone(..., raw_tokens=True))")


def naflex_maps(backbone, batch: Dict[str, Tensor]
                ) -> Tuple[List[List[Tensor]], List[Optional[Tensor]]]:
    """The outputs of ``backbone`` on one padded NaFlex ``batch`` (on the
    backbone's device), per output block: one ``(C, h_i, w_i)`` map per
    image, and the class tokens ``(B, C)`` (``None`` without one)."""
    prefix = backbone.num_extra_tokens + backbone.num_register_tokens
    outs = backbone(batch)
    maps = [naflex_featmaps(out, batch['patch_coord'], batch['patch_valid'],
                            prefix) for out in outs]
    cls = [out[:, 0] if backbone.num_extra_tokens else None for out in outs]
    return maps, cls


def naflex_features(backbone, paths: Sequence[str], max_tokens: int,
                    mean: Sequence[float], std: Sequence[float],
                    batch_size: int = 32, device='cpu',
                    progress: Optional[bool] = None
                    ) -> Dict[str, List[Optional[List[Tensor]]]]:
    """Patch maps and class tokens of every output of a RoPE ViT with
    ``out_type='raw'`` (:func:`mmpos.apis.init_backbone` builds it so) on
    NaFlex batches of the images at ``paths``, read one batch at a time
    (:func:`naflex_batch_features`).

    Returns:
        dict: ``patch``: per output block, one ``(C, h_i, w_i)`` map per
        image; ``cls``: per output block ``(N, C)`` or ``None``; float32,
        on the CPU.
    """
    check_naflex_backbone(backbone)
    return naflex_batch_features(backbone, (
        naflex_inputs(read_images(paths[start:start + batch_size]),
                      naflex_patch(backbone)[0], max_tokens, mean, std)
        for start in with_progress(range(0, len(paths), batch_size),
                                   progress)), device)


@torch.no_grad()
def naflex_batch_features(backbone, batches: Iterable[Dict[str, Tensor]],
                          device='cpu'
                          ) -> Dict[str, List[Optional[List[Tensor]]]]:
    """:func:`naflex_features` of NaFlex ``batches`` already made
    (:func:`naflex_inputs`, e.g. once for an online probe), in order."""
    patch: List[List[Tensor]] = []
    cls: List[List[Tensor]] = []
    for batch in batches:
        maps, tokens = naflex_maps(backbone, {k: v.to(device)
                                              for k, v in batch.items()})
        if not patch:
            patch, cls = [[] for _ in maps], [[] for _ in maps]
        for i, (per_image, token) in enumerate(zip(maps, tokens)):
            patch[i] += [m.float().cpu() for m in per_image]
            if token is not None:
                cls[i].append(token.float().cpu())
    if not patch:
        raise BadInputError('no image to extract features from')
    return dict(patch=patch, cls=[torch.cat(c) if c else None for c in cls])


def naflex_targets(maps: Sequence[np.ndarray], patch_size,
                   max_tokens: int, dtype=torch.float32) -> List[Tensor]:
    """Per-pixel targets ``(H, W)`` (labels, depths) of images of their
    size, each resized (nearest: values kept) to its image's NaFlex size
    ``(H_i, W_i)`` (:func:`~mmpos.datasets.transforms.naflex_size` of the
    map's size; ``patch_size`` an int or ``(p_h, p_w)``), as ``dtype``
    tensors."""
    from .dense import resize_maps
    return [resize_maps([m], naflex_size(m.shape[:2], patch_size,
                                         max_tokens), dtype)[0]
            for m in maps]


def naflex_label_maps(infos: Sequence[dict], patch_size,
                      max_tokens: int) -> List[Tensor]:
    """The semantic label maps of mmseg data ``infos``
    (:func:`~mmpos.evaluation.dense.read_label_maps`) at their images'
    NaFlex sizes (:func:`naflex_targets`), as ``long`` tensors."""
    from .dense import read_label_maps
    return naflex_targets(read_label_maps(infos), patch_size, max_tokens,
                          torch.long)


def naflex_pair_features(backbone, pairs: Sequence[dict], max_tokens: int,
                         mean: Sequence[float], std: Sequence[float],
                         batch_size: int = 32, device='cpu'):
    """:func:`~mmpos.evaluation.correspondence.pair_features` on NaFlex
    batches: the last output's maps of every pair's source and target image
    (each at its aspect ratio within ``max_tokens`` patches) and the
    images' original ``(H, W)``, as
    :func:`~mmpos.evaluation.correspondence.correspondence_pck` takes
    them."""
    from .correspondence import pair_image_hws
    paths = [p['src_img'] for p in pairs] + [p['trg_img'] for p in pairs]
    maps = naflex_features(backbone, paths, max_tokens, mean, std,
                           batch_size, device)['patch'][-1]
    return maps[:len(pairs)], maps[len(pairs):], pair_image_hws(pairs)
