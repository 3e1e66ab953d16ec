"""Patch-feature maps of a frozen RoPE ViT on NaFlex batches, for the dense
probes that take one map per image: keypoint correspondence
(:func:`~mmpos.evaluation.correspondence.correspondence_pck` matches each
pair's maps, whatever their grids). Each image is resized at its own
aspect ratio to the largest grid of at most ``max_tokens`` patches
(:class:`~mmpos.datasets.transforms.NaFlexResize`, timm's rule) instead of
to one square, the batch padded with a key mask
(:func:`~mmpos.datasets.naflex.naflex_batch`), and the tokens of every
output split back into one ``(C, h_i, w_i)`` map per image
(:func:`~mmpos.models.backbones.rope_vit.naflex_featmaps`). The map's
patch centres cover the original image as a square resize's do
(:func:`~mmpos.evaluation.correspondence.patch_centres`), with the
image's aspect ratio kept.
"""
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch
from torch import Tensor

from mmpos.apis.features import read_images
from mmpos.datasets.naflex import NaFlexDataPreprocessor, naflex_batch
from mmpos.datasets.transforms import NaFlexResize
from mmpos.errors import BadInputError, UnsupportedModelError
from mmpos.models.backbones.rope_vit import naflex_featmaps
from .frozen import with_progress


def naflex_inputs(images: Sequence[np.ndarray], patch_size: int,
                  max_tokens: int, mean: Sequence[float],
                  std: Sequence[float]) -> Dict[str, Tensor]:
    """uint8 RGB arrays ``(H, W, 3)`` -> a normalised NaFlex batch
    (``patches``, ``patch_coord``, ``patch_valid``), each image resized at
    its aspect ratio within ``max_tokens`` patches (bicubic)."""
    resize = NaFlexResize(patch_size, max_tokens)
    batch = naflex_batch([resize(dict(img=img))['img'] for img in images],
                         patch_size)
    return NaFlexDataPreprocessor(mean, std)(dict(inputs=batch))['inputs']


@torch.no_grad()
def naflex_features(backbone, paths: Sequence[str], max_tokens: int,
                    mean: Sequence[float], std: Sequence[float],
                    batch_size: int = 32, device='cpu',
                    progress: Optional[bool] = None
                    ) -> Dict[str, List[Optional[List[Tensor]]]]:
    """Patch maps and class tokens of every output of a RoPE ViT with
    ``out_type='raw'`` (:func:`mmpos.apis.init_backbone` builds it so) on
    NaFlex batches of the images at ``paths``.

    Returns:
        dict: ``patch``: per output block, one ``(C, h_i, w_i)`` map per
        image; ``cls``: per output block ``(N, C)`` or ``None``; float32,
        on the CPU.
    """
    if not hasattr(backbone, 'forward_naflex') or \
            getattr(backbone, 'out_type', None) != 'raw':
        raise UnsupportedModelError(
            f'{type(backbone).__name__}: NaFlex features need a RoPE ViT '
            "with out_type='raw' (init_backbone(..., raw_tokens=True))")
    if not paths:
        raise BadInputError('no image to extract features from')
    prefix = backbone.num_extra_tokens + backbone.num_register_tokens
    patch: List[List[Tensor]] = []
    cls: List[List[Tensor]] = []
    for start in with_progress(range(0, len(paths), batch_size), progress):
        batch = naflex_inputs(read_images(paths[start:start + batch_size]),
                              backbone.patch_size[0], max_tokens, mean, std)
        batch = {k: v.to(device) for k, v in batch.items()}
        outs = backbone(batch)
        if not patch:
            patch, cls = [[] for _ in outs], [[] for _ in outs]
        for i, out in enumerate(outs):
            patch[i] += [m.float().cpu() for m in naflex_featmaps(
                out, batch['patch_coord'], batch['patch_valid'], prefix)]
            if backbone.num_extra_tokens:
                cls[i].append(out[:, 0].float().cpu())
    return dict(patch=patch, cls=[torch.cat(c) if c else None for c in cls])


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
