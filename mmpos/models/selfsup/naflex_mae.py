"""MAE (He et al., "Masked Autoencoders Are Scalable Vision Learners", CVPR
2022) on NaFlex batches: images of their own sizes and aspect ratios,
padded to the batch's longest sequence
(:func:`~mmpos.datasets.naflex_collate`).

Per image of ``n_i`` patches, ``K_i = max(1, floor((1 - r) n_i))`` patches
are kept, drawn uniformly (``naflex_masking``: ``argsort`` of uniform
noise, MAE's shuffle; padding never kept); the kept sequences are padded
to ``max K_i``. The
encoder (:meth:`RoPEVisionTransformer.forward_naflex` with each image's
full grid) positions every kept patch at its own ``(y, x)``. The decoder
(MAE §3: a narrow transformer over encoded and mask tokens) places the
encoded tokens back at their indices, a shared mask token elsewhere, adds
the fixed 2-D sin-cos embedding of each token's coordinates (padding: none)
and runs global blocks with the padding masked out of every key. The loss
is MAE's: the mean squared error of the normalised pixels of each removed
patch (``norm_pix``: per-patch mean and variance, MAE Eq. in §3 "Target"),
over the removed real patches of the batch.
"""
from typing import Dict, List, Optional

import torch
import torch.nn as nn
from mmengine.model import ModuleList
from mmengine.model.weight_init import trunc_normal_
from mmpretrain.models.selfsup.base import BaseSelfSupervisor
from mmpretrain.models.utils import build_norm_layer
from torch import Tensor

from mmpos_positions import sincos_pos_embed_2d

from mmpos.registry import MODELS
from ..layers.masking import NaFlexMasking, gather_tokens, naflex_masking
from ..backbones.rope_vit import RoPETransformerEncoderLayer, naflex_grids


@MODELS.register_module()
class NaFlexMAE(BaseSelfSupervisor):
    """MAE on NaFlex batches (module docstring).

    Args:
        backbone: a :class:`~mmpos.models.backbones.RoPEVisionTransformer`
            config with the class token and ``out_type='raw'``.
        mask_ratio: ``r``, the removed fraction of each image's patches.
        decoder: ``embed_dims``, ``num_layers``, ``num_heads`` of the
            decoder (MAE's mini default: 128, 2, 4).
        norm_pix: normalise each target patch by its mean and variance.
        data_preprocessor: :class:`~mmpos.datasets.NaFlexDataPreprocessor`.
    """

    def __init__(self, backbone: dict, mask_ratio: float = 0.75,
                 decoder: dict = dict(embed_dims=128, num_layers=2,
                                      num_heads=4),
                 norm_pix: bool = True,
                 data_preprocessor: Optional[dict] = None,
                 init_cfg: Optional[dict] = None):
        super().__init__(backbone=backbone,
                         data_preprocessor=data_preprocessor,
                         init_cfg=init_cfg)
        if not 0 <= mask_ratio < 1:
            raise ValueError(f'mask_ratio must be in [0, 1), got '
                             f'{mask_ratio}')
        self.backbone.check_kept_forward(type(self).__name__)
        self.mask_ratio, self.norm_pix = mask_ratio, norm_pix
        width, dims = self.backbone.embed_dims, decoder['embed_dims']
        proj = self.backbone.patch_embed.projection
        pixels = proj.in_channels * proj.kernel_size[0] * proj.kernel_size[1]
        self.decoder_embed = nn.Linear(width, dims)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, dims))
        self.decoder_blocks = ModuleList(
            RoPETransformerEncoderLayer(dims, decoder['num_heads'], 4 * dims,
                                        norm_cfg=dict(type='LN', eps=1e-6))
            for _ in range(decoder['num_layers']))
        self.decoder_norm = build_norm_layer(dict(type='LN', eps=1e-6), dims)
        self.decoder_pred = nn.Linear(dims, pixels)

    def init_weights(self):
        super().init_weights()
        trunc_normal_(self.mask_token, std=.02)

    def extract_feat(self, inputs: dict) -> tuple:
        """The backbone's outputs on a NaFlex batch (whole images)."""
        return self.backbone(inputs)

    def loss(self, inputs: dict, data_samples: List,
             **kwargs) -> Dict[str, Tensor]:
        patches, coord = inputs['patches'], inputs['patch_coord']
        valid = inputs['patch_valid'].bool()
        kept = naflex_masking(valid, self.mask_ratio)
        ids = kept.ids_keep
        tokens = self.backbone.forward_naflex(
            gather_tokens(patches, ids), gather_tokens(coord, ids),
            kept.kept_valid, grids=naflex_grids(coord, valid))[-1]
        tokens = self.backbone.without_registers(tokens)
        pred = self.decode(tokens, kept, coord, valid)
        target = patches
        if self.norm_pix:
            mean = target.mean(-1, keepdim=True)
            var = target.var(-1, keepdim=True)
            target = (target - mean) / (var + 1e-6)**.5
        error = (pred - target).pow(2).mean(-1)  # (B, N)
        removed = kept.removed.to(error.dtype)
        return dict(loss=(error * removed).sum() / removed.sum())

    def decode(self, tokens: Tensor, kept: NaFlexMasking, coord: Tensor,
               valid: Tensor) -> Tensor:
        """``(B, 1 + K, C)`` encoder tokens -> ``(B, N, p p c)`` predicted
        pixels of every patch of the padded sequence."""
        x = self.decoder_embed(tokens)
        B, N = valid.shape
        full = self.mask_token.expand(B, N, -1).clone()
        ids, kept_valid = kept.ids_keep, kept.kept_valid
        rows = torch.arange(B, device=x.device)[:, None].expand_as(ids)
        full[rows[kept_valid], ids[kept_valid]] = x[:, 1:][kept_valid]
        pos = sincos_pos_embed_2d(coord.flip(-1).float(), x.shape[-1])
        full = full + pos.to(x.dtype) * valid[..., None]
        x = torch.cat((x[:, :1], full), dim=1)
        key_mask = torch.cat((valid.new_ones(B, 1), valid), dim=1)
        for block in self.decoder_blocks:
            x = block(x, key_mask=key_mask)
        return self.decoder_pred(self.decoder_norm(x))[:, 1:]
