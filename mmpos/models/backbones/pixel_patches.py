"""The image itself as patch tokens: the raw-pixel baseline of the probes.

A probe that scores a pretrained backbone must beat what the same probe
makes of the pixels (issue 33): :class:`PixelPatches` hands the probes'
code the normalised pixels of each ``p x p`` patch as that patch's token,
in the layout of a ViT's ``'raw'`` output, so every probe (depth,
correspondence, retrieval, linear, kNN) runs on it unchanged.
"""
from typing import Sequence, Union

import torch
import torch.nn.functional as F
from mmengine.model import BaseModule
from torch import Tensor

from mmpos.registry import MODELS
from mmpos.errors import BadInputError


@MODELS.register_module()
class PixelPatches(BaseModule):
    """Patch tokens that are the patches' pixels; no parameters.

    ``x`` ``(B, 3, H, W)`` -> one output, with ``h = H / p``, ``w = W / p``
    and ``C = 3 p^2`` (channel-major within a patch, as ``F.unfold``):

    * ``out_type='raw'``: tokens ``(B, 1 + h w, C)``, the first the mean of
      the patch tokens (the class token the probes' heads may read), then
      the patches row-major;
    * ``out_type='featmap'``: the map ``(B, C, h, w)``.

    A NaFlex batch (the dict of :meth:`forward_naflex`'s arguments) gives
    the ``'raw'`` layout of its padded sequences, as the RoPE ViT's
    :meth:`~mmpos.models.backbones.RoPEVisionTransformer.forward_naflex`.

    Args:
        patch_size: ``p``, the side of a patch in pixels.
        img_size: the side the probes resize images to (read by tools that
            ask a backbone its input size).
        out_type: ``'raw'`` or ``'featmap'``.
        out_indices: accepted for the probes' ``out_indices`` (one
            output: ``(0, )`` or ``(-1, )``).
    """
    OUT_TYPES = ('raw', 'featmap')
    num_layers = 1
    num_extra_tokens = 1
    num_register_tokens = 0

    def __init__(self,
                 patch_size: int = 16,
                 img_size: Union[int, Sequence[int]] = 224,
                 out_type: str = 'raw',
                 out_indices: Sequence[int] = (-1, ),
                 init_cfg=None):
        super().__init__(init_cfg)
        if out_type not in self.OUT_TYPES:
            raise ValueError(f'out_type must be one of {self.OUT_TYPES}, got '
                             f'{out_type!r}')
        if tuple(out_indices) not in ((0, ), (-1, )):
            raise ValueError('PixelPatches has one output: out_indices (0,) '
                             f'or (-1,), got {tuple(out_indices)}')
        self.patch_size = patch_size
        self.img_size = img_size
        self.out_type = out_type
        self.out_indices = (0, )

    def forward(self, x: Union[Tensor, dict]) -> tuple:
        if isinstance(x, dict):
            return self.forward_naflex(**x)
        p = self.patch_size
        if x.shape[-2] % p or x.shape[-1] % p:
            raise BadInputError(f'PixelPatches: input {tuple(x.shape[-2:])} '
                                f'is not a multiple of the patch size {p}')
        h, w = x.shape[-2] // p, x.shape[-1] // p
        patches = F.unfold(x, p, stride=p)  # (B, 3 p^2, h w)
        if self.out_type == 'featmap':
            return (patches.reshape(x.shape[0], -1, h, w), )
        tokens = patches.transpose(1, 2)  # (B, h w, 3 p^2)
        return (torch.cat([tokens.mean(1, keepdim=True), tokens], 1), )

    def forward_naflex(self, patches: Tensor, patch_coord: Tensor,
                       patch_valid: Tensor) -> tuple:
        """A NaFlex batch: ``patches`` ``(B, N, p * p * 3)``, each in
        ``(row, column, channel)`` order, ``patch_valid`` ``(B, N)``
        (``patch_coord`` is not needed) -> ``'raw'`` tokens ``(B, 1 + N,
        3 p^2)``: the mean of the sample's valid patch tokens, then its
        patches channel-major as :meth:`forward` gives them (padding
        kept, zero)."""
        if self.out_type != 'raw':
            raise BadInputError("PixelPatches: NaFlex batches give 'raw' "
                                f'tokens, not {self.out_type!r}')
        p, valid = self.patch_size, patch_valid[..., None].to(patches)
        tokens = patches.reshape(*patches.shape[:2], p, p, -1).permute(
            0, 1, 4, 2, 3).flatten(2) * valid
        mean = tokens.sum(1, keepdim=True) / valid.sum(1, keepdim=True)
        return (torch.cat([mean, tokens], 1), )


__all__ = ['PixelPatches']
