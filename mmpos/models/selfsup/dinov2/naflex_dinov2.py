"""DINOv2 (iBOT + KoLeo + Sinkhorn-Knopp, ICPF Eqs. 1-3) on NaFlex views:
every global and local crop at its own aspect ratio and size (e.g.
``NaFlexRandomResizedCrop`` per view of mmpretrain's ``MultiView``), each
view a padded NaFlex batch (:func:`~mmpos.datasets.naflex_collate` of
multi-view samples).

What changes against :class:`DINOv2` is where one grid was assumed:

* the views of a kind are concatenated padded to their longest sequence
  (:func:`~mmpos.datasets.naflex.cat_naflex`);
* the student and the teacher embed the patches, put ``mask_token`` in
  the content-masked ones, add the APE of each image's own grid and run
  the blocks with the padding masked out of every key
  (:meth:`RoPEVisionTransformer.forward_naflex_tokens`);
* the iBOT block masks (Eq. 2) are drawn per image on its own grid, with a
  ratio of its own patches, and never cover padding, so the masked-token
  loss reads real patches only (its normalisation, over all global-view
  images, is DINOv2's).

The image loss, the Sinkhorn-Knopp centring and KoLeo take the class
tokens as :class:`DINOv2` does; the centring and KoLeo mix the images of
a batch by design, so a mixed batch gives each image the tokens it gets
alone (tested), not the loss. On views of one size and the same masks,
the losses are :class:`DINOv2`'s (tested).
"""
from typing import Dict, List

import torch
from torch import Tensor

from mmpos.registry import MODELS
from ....datasets.naflex import cat_naflex
from ...backbones.rope_vit import naflex_grids
from ...layers.block_masking import sample_num_masked
from ...utils.ema import check_teachers_set
from .dinov2 import DINOv2


@MODELS.register_module()
class NaFlexDINOv2(DINOv2):
    """:class:`DINOv2` on NaFlex views (module docstring); arguments as
    :class:`DINOv2`, with a RoPE ViT backbone with APE (any position
    scheme besides) and :class:`~mmpos.datasets.NaFlexDataPreprocessor`.

    A view's "grid" (``hw`` of :class:`DINOv2`'s methods) is the NaFlex
    batch itself: ``patch_coord`` and ``patch_valid`` give each image's.
    """

    def _split_views(self, inputs: List[dict]):
        if not isinstance(inputs, (list, tuple)) or \
                len(inputs) < self.num_global_crops or \
                not isinstance(inputs[0], dict):
            raise ValueError(f'{type(self).__name__} expects a list of at '
                             f'least num_global_crops={self.num_global_crops}'
                             ' NaFlex views (dicts of patches, patch_coord, '
                             f'patch_valid), got {type(inputs).__name__}')
        g = self.num_global_crops
        return (cat_naflex(inputs[:g]),
                cat_naflex(inputs[g:]) if len(inputs) > g else None)

    def _grid(self, view: dict) -> dict:
        return view

    def _positions(self, net, hw: dict, views, geometry) -> Tensor:
        """Each image's APE on its own grid, ``(n, N, C)`` (padding 0)."""
        backbone = net.backbone
        if backbone.pos_embed is None:
            raise ValueError('DINOv2 needs a backbone with use_ape=True')
        valid = hw['patch_valid'].bool()
        return backbone.naflex_pos_embed(
            hw['patch_coord'], valid, naflex_grids(hw['patch_coord'], valid),
            backbone.pos_embed.dtype)

    @staticmethod
    def _encode(net, img: dict, pos: Tensor, content_mask=None,
                mask_token=None, coords=None) -> Tensor:
        """:meth:`DINOv2._encode` of a NaFlex batch: ``(n, 1 + N, C)``."""
        backbone = net.backbone
        x = backbone.embed_patches(img['patches'])
        if content_mask is not None:
            x = torch.where(content_mask[..., None], mask_token.to(x.dtype), x)
        valid = img['patch_valid'].bool()
        return backbone.without_registers(backbone.forward_naflex_tokens(
            x + pos, img['patch_coord'], valid,
            naflex_grids(img['patch_coord'], valid))[0])

    def _sample_masks(self, num: int, hw: dict,
                      device) -> Dict[str, Tensor]:
        """:meth:`DINOv2._sample_masks` with each chosen image's block mask
        drawn on its own grid (a ratio of its own patches), ``(num, N)``;
        padding never masked."""
        coord, valid = hw['patch_coord'], hw['patch_valid'].bool()
        grids = naflex_grids(coord, valid).tolist()
        order = torch.randperm(num, device=device)
        masks, start = {}, 0
        for key, share in self._mask_shares().items():
            chosen = order[start:start + round(share * num)]
            start += chosen.numel()
            mask = torch.zeros_like(valid)
            for i in chosen.tolist():
                h, w = grids[i]
                count = sample_num_masked(1, h * w, self.mask_ratio_range,
                                          device)
                grid_mask = self.maskings[key](count, (h, w))[0]
                index = (coord[i, :, 0] * w + coord[i, :, 1]).clamp(
                    max=h * w - 1)
                mask[i] = grid_mask[index] & valid[i]
            masks[key] = mask
        return masks

    def loss(self, inputs: List[dict], data_samples: List,
             **kwargs) -> Dict[str, Tensor]:
        """ICPF Eq. 3 on NaFlex views (globals first)."""
        globals_ = self._split_views(inputs)[0]
        if self.training:
            check_teachers_set(self)
        masks = self._sample_masks(len(globals_['patches']), globals_,
                                   globals_['patches'].device)
        targets = self.teacher_targets(globals_, globals_, None, masks)
        return self.student_losses(inputs, None, masks, targets)
