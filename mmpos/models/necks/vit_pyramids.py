"""Necks that turn a plain ViT's single-scale tokens into a feature pyramid.

Both are registered in mmpretrain's MODELS; mmdet and mmseg configs use them
as ``neck=dict(type='mmpretrain.SimpleFeaturePyramid', ...)``.
"""
from typing import Optional, Sequence, Tuple

import torch
import torch.nn as nn
from mmengine.model import BaseModule
from mmpretrain.models.utils import build_norm_layer

from mmpos.registry import MODELS


def _resample(scale: float, channels: int, norm_cfg: dict) -> Tuple[nn.Module, int]:
    """Layers that resize a stride-s map to stride s/scale, and their output width.

    Scales 4 and 2 use 2x2 stride-2 transposed convolutions (the first of two
    halves the width, as in ViTDet); 1 is the identity; 0.5 and 0.25 are
    max-pooling (the latter for ViTs with stride-8 patches).
    """
    if scale == 4.0:
        return nn.Sequential(
            nn.ConvTranspose2d(channels, channels // 2, 2, 2),
            build_norm_layer(norm_cfg, channels // 2), nn.GELU(),
            nn.ConvTranspose2d(channels // 2, channels // 4, 2, 2)), channels // 4
    if scale == 2.0:
        return nn.ConvTranspose2d(channels, channels // 2, 2, 2), channels // 2
    if scale == 1.0:
        return nn.Identity(), channels
    if scale in (0.5, 0.25):
        kernel = int(1 / scale)
        return nn.MaxPool2d(kernel, kernel), channels
    raise ValueError(
        f'scale factor {scale} is not one of 4.0, 2.0, 1.0, 0.5, 0.25')


@MODELS.register_module()
class SimpleFeaturePyramid(BaseModule):
    """ViTDet's simple feature pyramid (Li et al., 2022, Sec. 3).

    Builds every level from the *last* ViT feature map: transposed convs up,
    identity, max-pool down, then a 1x1 and a 3x3 conv (each followed by a
    channel LayerNorm) per level; an extra level is max-pooled from the
    coarsest one for RPN's P6.

    Args:
        in_channels (int): ViT width C.
        out_channels (int): Width of every pyramid level. Defaults to 256.
        scale_factors (Sequence[float]): Resampling of the input per level.
            Defaults to (4.0, 2.0, 1.0, 0.5), i.e. strides 4/8/16/32 from a
            stride-16 ViT.
        num_outs (int): Number of outputs; ``len(scale_factors) + 1`` adds the
            max-pooled level. Defaults to 5.
        norm_cfg (dict): Norm after each conv. Defaults to ``LN2d``.

    Inputs: tuple of (B, C, H, W) maps; only the last one is used.
    Returns: tuple of ``num_outs`` maps (B, out_channels, H*s, W*s).
    """

    def __init__(self,
                 in_channels: int,
                 out_channels: int = 256,
                 scale_factors: Sequence[float] = (4.0, 2.0, 1.0, 0.5),
                 num_outs: int = 5,
                 norm_cfg: dict = dict(type='LN2d', eps=1e-6),
                 init_cfg=None):
        super().__init__(init_cfg=init_cfg)
        if num_outs not in (len(scale_factors), len(scale_factors) + 1):
            raise ValueError(f'num_outs={num_outs} must be len(scale_factors) '
                             f'or one more, got scale_factors={scale_factors}')
        self.num_outs = num_outs
        self.stages = nn.ModuleList()
        for scale in scale_factors:
            resample, width = _resample(scale, in_channels, norm_cfg)
            self.stages.append(
                nn.Sequential(
                    resample,
                    nn.Conv2d(width, out_channels, 1, bias=False),
                    build_norm_layer(norm_cfg, out_channels),
                    nn.Conv2d(out_channels, out_channels, 3, padding=1,
                              bias=False),
                    build_norm_layer(norm_cfg, out_channels)))

    def forward(self, inputs: Tuple[torch.Tensor]) -> Tuple[torch.Tensor]:
        x = inputs[-1]
        outs = [stage(x) for stage in self.stages]
        if self.num_outs > len(outs):
            outs.append(nn.functional.max_pool2d(outs[-1], 1, stride=2))
        return tuple(outs)


@MODELS.register_module()
class DeconvMultiLevelNeck(BaseModule):
    """BEiT/MAE-style multi-level neck for dense prediction with a plain ViT.

    Takes feature maps from several ViT blocks (e.g. blocks 4, 6, 8, 12 of
    ViT-B) at stride 16 and resamples them by (4, 2, 1, 0.5) to strides
    4/8/16/32, keeping the width, so that mmdet's ``FPN`` or mmseg's
    ``UPerHead`` can consume them with ``in_channels=[C] * 4``. Upsampling
    is learned (transposed convolutions), downsampling max-pools; mmseg's
    ``MultiLevelNeck`` instead maps each input to ``out_channels`` with a
    1x1 conv and resizes by interpolation.

    Args:
        in_channels (int): ViT width C.
        scale_factors (Sequence[float]): One per input map.
            Defaults to (4.0, 2.0, 1.0, 0.5).
        norm_cfg (dict): Norm between the two transposed convs of the 4x
            branch. Defaults to ``SyncBN`` (BN when not distributed).
        in_norm_cfg (dict, optional): Norm applied to every input map first.
            Intermediate ViT blocks are not normalised (only the last one
            passes the final LayerNorm); without this, Mask R-CNN trained
            from scratch on mini-COCO did not learn to classify RoIs while
            the same model with normalised inputs did. Defaults to ``LN2d``;
            ``None`` feeds the raw block outputs as BEiT/MAE do.

    Inputs: tuple of len(scale_factors) maps (B, C, H, W).
    Returns: tuple of maps (B, C_i, H*s_i, W*s_i) with C_i = C.
    """

    def __init__(self,
                 in_channels: int,
                 scale_factors: Sequence[float] = (4.0, 2.0, 1.0, 0.5),
                 norm_cfg: dict = dict(type='SyncBN', requires_grad=True),
                 in_norm_cfg: Optional[dict] = dict(type='LN2d', eps=1e-6),
                 init_cfg=None):
        super().__init__(init_cfg=init_cfg)
        self.in_norms = nn.ModuleList(
            build_norm_layer(in_norm_cfg, in_channels) if in_norm_cfg else
            nn.Identity() for _ in scale_factors)
        self.stages = nn.ModuleList()
        for scale in scale_factors:
            if scale in (4.0, 2.0):
                # Keep the width: deconvs map C -> C instead of halving it.
                layers = [nn.ConvTranspose2d(in_channels, in_channels, 2, 2)]
                if scale == 4.0:
                    layers += [
                        build_norm_layer(norm_cfg, in_channels), nn.GELU(),
                        nn.ConvTranspose2d(in_channels, in_channels, 2, 2)
                    ]
                self.stages.append(nn.Sequential(*layers))
            else:
                self.stages.append(_resample(scale, in_channels, norm_cfg)[0])

    def forward(self, inputs: Tuple[torch.Tensor]) -> Tuple[torch.Tensor]:
        if len(inputs) != len(self.stages):
            raise ValueError(f'DeconvMultiLevelNeck expects '
                             f'{len(self.stages)} feature maps, got '
                             f'{len(inputs)}; set the '
                             'backbone out_indices to match scale_factors')
        return tuple(
            stage(norm(x))
            for stage, norm, x in zip(self.stages, self.in_norms, inputs))
