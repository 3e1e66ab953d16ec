"""Mobile-Former encoders of QB-Heat (Chen et al., Tab. 8, App. B.1).

Mobile-Former (Chen et al., CVPR 2022) runs a MobileNet-style *Mobile*
branch on the feature map and a *Former* on ``M = 6`` learnable global
tokens in parallel, joined by a two-way bridge of light cross attentions:

* Mobile->Former: tokens query the feature map; keys and values are the
  feature map itself (no projection), so it costs ``O(M * HW * C)``.
* Former: token self-attention (query projection only, keys = values =
  tokens) + channel projection, then a 2x FFN; post-LayerNorm.
* Mobile<-Former: every pixel queries the tokens (no query projection);
  keys and values are projections of the tokens. The result is added to
  the Mobile output.
* The Mobile sub-block's activations are dynamic ReLUs whose two slopes
  per channel are generated from the first global token.

QB-Heat's variants (Tab. 8) have 12 blocks in 4 stages: a lite bottleneck
at stride 2, then Mobile-Former blocks; the last stage stays at stride 16
("we increase the resolution for the last stage from 1/32 to 1/16").
``last_stage_stride=32`` restores the usual 1/32 by giving the depthwise
conv of the first 480/240/120-wide block (where the original Mobile-Former
starts its fifth stage) stride 2; weights are interchangeable between the
two settings. A final 1x1 conv expands to 2880/1440/720 channels.

Choices where Tab. 8 is silent or inconsistent (see configs/qbheat/README):

* The first stage-4 block of MF-1.0G is listed as ``288/96``, a copy of the
  row above; every other MF-1.0G width is half of MF-3.7G, so we use
  ``576/176`` (the next block's input is 176 wide).
* ``#exp`` of a downsampling block (M-F down: dw3x3/s2 expand -> pw ->
  dw3x3 expand -> pw) is its first expansion; the second is ``4 * out``
  as in the original Mobile-Former.

Output levels (``out_indices``): 0-3 are the outputs of stages 1-4 (strides
2, 4, 8, 16 or 32), 4 is the final 1x1-conv map (same stride as stage 4).
"""
import math
from typing import Dict, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmcv.cnn.bricks import DropPath
from mmengine.model.weight_init import trunc_normal_
from mmpretrain.models.backbones.base_backbone import BaseBackbone
from torch import Tensor

from mmpos.registry import MODELS


def _conv_bn(in_ch: int, out_ch: int, kernel: int = 1, stride: int = 1,
             groups: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(in_ch, out_ch, kernel, stride, kernel // 2, groups=groups,
                  bias=False), nn.BatchNorm2d(out_ch))


def _heads(x: Tensor, num_heads: int) -> Tensor:
    """(B, N, C) -> (B, heads, N, C / heads)."""
    B, N, C = x.shape
    return x.reshape(B, N, num_heads, C // num_heads).transpose(1, 2)


def _merge(x: Tensor) -> Tensor:
    """(B, heads, N, c) -> (B, N, heads * c)."""
    B, H, N, c = x.shape
    return x.transpose(1, 2).reshape(B, N, H * c)


class DynamicReLU(nn.Module):
    """Two-piece dynamic ReLU ``max(a1 * x, a2 * x)`` per channel, with
    ``a1 in [0, 2]``, ``a2 in [-1, 1]`` generated from the first global
    token (an MLP with reduction 4 and a hard sigmoid). At a zero MLP
    output it is the plain ReLU (``a1 = 1, a2 = 0``).

    Shapes: x (B, C, H, W), tokens (B, M, d) -> (B, C, H, W).
    """

    def __init__(self, channels: int, token_dims: int, reduction: int = 4):
        super().__init__()
        self.hyper = nn.Sequential(
            nn.Linear(token_dims, token_dims // reduction),
            nn.ReLU(inplace=True),
            nn.Linear(token_dims // reduction, 2 * channels),
            nn.Hardsigmoid())

    def forward(self, x: Tensor, tokens: Tensor) -> Tensor:
        a1, a2 = self.hyper(tokens[:, 0])[..., None, None].chunk(2, dim=1)
        return torch.maximum(x * (2 * a1), x * (2 * a2 - 1))


class MobileToFormer(nn.Module):
    """Tokens attend to pixels; ``tokens + proj(attn)``, post-LN.

    Shapes: x (B, C, H, W), tokens (B, M, d) -> (B, M, d).
    """

    def __init__(self, channels: int, token_dims: int, num_heads: int = 2,
                 drop_path: float = 0.):
        super().__init__()
        self.num_heads = num_heads
        self.q = nn.Linear(token_dims, channels)
        self.proj = nn.Linear(channels, token_dims)
        self.norm = nn.LayerNorm(token_dims)
        self.drop_path = DropPath(drop_path)

    def forward(self, x: Tensor, tokens: Tensor) -> Tensor:
        kv = _heads(x.flatten(2).transpose(1, 2), self.num_heads)
        q = _heads(self.q(tokens), self.num_heads)
        out = _merge(F.scaled_dot_product_attention(q, kv, kv))
        return self.norm(tokens + self.drop_path(self.proj(out)))


class Former(nn.Module):
    """Light transformer on the global tokens (post-LN, 2x FFN).

    Shapes: tokens (B, M, d) -> (B, M, d).
    """

    def __init__(self, token_dims: int, num_heads: int = 4,
                 ffn_ratio: int = 2, drop_path: float = 0.):
        super().__init__()
        self.num_heads = num_heads
        self.q = nn.Linear(token_dims, token_dims)
        self.proj = nn.Linear(token_dims, token_dims)
        self.norm1 = nn.LayerNorm(token_dims)
        self.ffn = nn.Sequential(
            nn.Linear(token_dims, ffn_ratio * token_dims), nn.GELU(),
            nn.Linear(ffn_ratio * token_dims, token_dims))
        self.norm2 = nn.LayerNorm(token_dims)
        self.drop_path = DropPath(drop_path)

    def forward(self, tokens: Tensor) -> Tensor:
        kv = _heads(tokens, self.num_heads)
        q = _heads(self.q(tokens), self.num_heads)
        out = _merge(F.scaled_dot_product_attention(q, kv, kv))
        tokens = self.norm1(tokens + self.drop_path(self.proj(out)))
        return self.norm2(tokens + self.drop_path(self.ffn(tokens)))


class FormerToMobile(nn.Module):
    """Pixels attend to tokens; ``x + attn`` (no query projection).

    Shapes: x (B, C, H, W), tokens (B, M, d) -> (B, C, H, W).
    """

    def __init__(self, channels: int, token_dims: int, num_heads: int = 2,
                 drop_path: float = 0.):
        super().__init__()
        self.num_heads = num_heads
        self.k = nn.Linear(token_dims, channels)
        self.v = nn.Linear(token_dims, channels)
        self.drop_path = DropPath(drop_path)

    def forward(self, x: Tensor, tokens: Tensor) -> Tensor:
        B, C, H, W = x.shape
        q = _heads(x.flatten(2).transpose(1, 2), self.num_heads)
        out = F.scaled_dot_product_attention(
            q, _heads(self.k(tokens), self.num_heads),
            _heads(self.v(tokens), self.num_heads))
        out = _merge(out).transpose(1, 2).reshape(B, C, H, W)
        return x + self.drop_path(out)


class LiteBottleneck(nn.Module):
    """Lite bottleneck (MicroNet): depthwise 3x3 expansion + ReLU6 +
    pointwise projection; residual when shapes match. No tokens.

    Shapes: (B, C_in, H, W) -> (B, C_out, H / stride, W / stride).
    """

    def __init__(self, in_ch: int, exp: int, out_ch: int, stride: int = 1):
        super().__init__()
        self.dw = _conv_bn(in_ch, exp, 3, stride, groups=in_ch)
        self.pw = _conv_bn(exp, out_ch)
        self.residual = stride == 1 and in_ch == out_ch

    def forward(self, x: Tensor) -> Tensor:
        out = self.pw(F.relu6(self.dw(x)))
        return x + out if self.residual else out


class MobileFormerBlock(nn.Module):
    """Mobile-Former block: Mobile->Former, Former, Mobile, Mobile<-Former.

    ``down=True`` is the M-F-down block whose Mobile sub-block is
    dw3x3(stride 2, C_in -> exp) / pw(-> C_out) / dw3x3(C_out -> 4 C_out) /
    pw(-> C_out) with a residual around the last two convs; otherwise the
    Mobile sub-block is the inverted bottleneck pw(C_in -> exp) / dw3x3
    (``stride``) / pw(-> C_out) with an identity residual when shapes match.

    Shapes: x (B, C_in, H, W), tokens (B, M, d) ->
    (B, C_out, H / s, W / s), (B, M, d).
    """

    def __init__(self, in_ch: int, exp: int, out_ch: int, token_dims: int,
                 down: bool = False, stride: int = 1, num_heads: int = 2,
                 drop_path: float = 0.):
        super().__init__()
        self.down = down
        self.to_former = MobileToFormer(in_ch, token_dims, num_heads,
                                        drop_path)
        self.former = Former(token_dims, drop_path=drop_path)
        if down:
            self.conv1 = _conv_bn(in_ch, exp, 3, 2, groups=in_ch)
            self.conv2 = _conv_bn(exp, out_ch)
            self.conv3 = _conv_bn(out_ch, 4 * out_ch, 3, groups=out_ch)
            self.conv4 = _conv_bn(4 * out_ch, out_ch)
            self.act1 = DynamicReLU(exp, token_dims)
            self.act3 = DynamicReLU(4 * out_ch, token_dims)
        else:
            self.conv1 = _conv_bn(in_ch, exp)
            self.conv2 = _conv_bn(exp, exp, 3, stride, groups=exp)
            self.conv3 = _conv_bn(exp, out_ch)
            self.act1 = DynamicReLU(exp, token_dims)
            self.act2 = DynamicReLU(exp, token_dims)
        self.residual = not down and stride == 1 and in_ch == out_ch
        self.drop_path = DropPath(drop_path)
        self.to_mobile = FormerToMobile(out_ch, token_dims, num_heads,
                                        drop_path)

    def forward(self, x: Tensor, tokens: Tensor) -> Tuple[Tensor, Tensor]:
        tokens = self.former(self.to_former(x, tokens))
        if self.down:
            y = self.conv2(self.act1(self.conv1(x), tokens))
            y = y + self.drop_path(
                self.conv4(self.act3(self.conv3(y), tokens)))
        else:
            y = self.act1(self.conv1(x), tokens)
            y = self.conv3(self.act2(self.conv2(y), tokens))
            if self.residual:
                y = x + self.drop_path(y)
        return self.to_mobile(y, tokens), tokens


def _arch(scale: int, stem: int, lite: int, token_dims: int,
          blocks: Sequence[Tuple[int, int]], last: int) -> dict:
    return dict(stem=stem, lite=lite, token_dims=token_dims,
                blocks=[(e * scale, o * scale) for e, o in blocks],
                last=last * scale)


# (#exp, #out) of the 11 Mobile-Former blocks of Tab. 8; stage 2 = blocks
# 0-1, stage 3 = blocks 2-4, stage 4 = blocks 5-10; blocks 0, 2, 5 are
# M-F-down. MF-1.0G is MF-3.7G at half width (see the module docstring).
_WIDE = [(192, 56), (168, 56), (336, 96), (288, 96), (288, 96), (576, 176),
         (704, 176), (704, 176), (1056, 240), (1440, 240), (1440, 240)]


@MODELS.register_module()
class MobileFormer(BaseBackbone):
    """Mobile-Former encoder (QB-Heat Tab. 8) for mmpretrain and mmdet.

    Args:
        arch: ``'285m'``, ``'1.0g'``, ``'3.7g'`` or a dict with keys
            ``stem, lite, token_dims, blocks, last`` (``blocks``: 11
            ``(exp, out)`` pairs).
        num_tokens: number of global tokens ``M`` (6 in the paper).
        last_stage_stride: 16 (QB-Heat) or 32 (original Mobile-Former).
        out_indices: levels to return, 0-3 = stages 1-4, 4 = final 1x1 conv.
        frozen_stages: freeze the stem and stages ``<= frozen_stages``
            (0-based, 0-3); 4 also freezes the final conv and the tokens,
            i.e. the whole encoder (decoder probing). -1 freezes nothing.
        norm_eval: keep BatchNorm layers in eval mode during training.
        drop_path_rate: stochastic depth, linearly increasing per block.
    """
    arch_zoo: Dict[str, dict] = {
        '285m': dict(stem=16, lite=32, token_dims=192, last=720,
                     blocks=[(96, 28), (84, 28), (168, 48), (144, 48),
                             (144, 48), (240, 80), (320, 88), (480, 88),
                             (528, 120), (720, 120), (720, 120)]),
        '1.0g': _arch(1, 32, 64, 256, _WIDE, 1440),
        '3.7g': _arch(2, 64, 128, 256, _WIDE, 1440),
    }
    _STAGE_ENDS = (2, 5, 11)  # exclusive end block of stages 2, 3, 4
    _DOWN = (0, 2, 5)
    _STRIDE32_BLOCK = 8

    def __init__(self, arch='285m', num_tokens: int = 6,
                 last_stage_stride: int = 16,
                 out_indices: Sequence[int] = (4, ), frozen_stages: int = -1,
                 norm_eval: bool = False, drop_path_rate: float = 0.,
                 init_cfg=None):
        super().__init__(init_cfg)
        if isinstance(arch, str):
            if arch.lower() not in self.arch_zoo:
                raise ValueError(f'MobileFormer: arch={arch!r} is not one of '
                                 f'{sorted(self.arch_zoo)}')
            arch = self.arch_zoo[arch.lower()]
        missing = {'stem', 'lite', 'token_dims', 'blocks', 'last'} - set(arch)
        if missing or len(arch['blocks']) != 11:
            raise ValueError(f'MobileFormer: arch dict needs keys stem, lite, '
                             f'token_dims, last and 11 blocks; got {arch}')
        if last_stage_stride not in (16, 32):
            raise ValueError(f'MobileFormer: last_stage_stride must be 16 or '
                             f'32, got {last_stage_stride}')
        out_indices = tuple(out_indices)
        if not out_indices or any(i not in range(5) for i in out_indices):
            raise ValueError(f'MobileFormer: out_indices must be in 0..4, '
                             f'got {out_indices}')
        if frozen_stages not in range(-1, 5):
            raise ValueError(f'MobileFormer: frozen_stages must be in -1..4, '
                             f'got {frozen_stages}')
        self.out_indices = out_indices
        self.frozen_stages = frozen_stages
        self.norm_eval = norm_eval
        d = arch['token_dims']
        self.tokens = nn.Parameter(trunc_normal_(torch.empty(num_tokens, d)))
        self.stem = nn.Sequential(
            *_conv_bn(3, arch['stem'], 3, 2), nn.Hardswish(inplace=True))
        self.lite = LiteBottleneck(arch['stem'], arch['lite'], arch['stem'])
        dpr = torch.linspace(0, drop_path_rate, 12)[1:].tolist()
        self.blocks = nn.ModuleList()
        in_ch = arch['stem']
        for i, (exp, out) in enumerate(arch['blocks']):
            stride = 2 if (last_stage_stride == 32
                           and i == self._STRIDE32_BLOCK) else 1
            self.blocks.append(MobileFormerBlock(
                in_ch, exp, out, d, down=i in self._DOWN, stride=stride,
                drop_path=dpr[i]))
            in_ch = out
        self.last_conv = nn.Sequential(
            *_conv_bn(in_ch, arch['last']), nn.ReLU6(inplace=True))
        self.stage_channels = (arch['stem'], arch['blocks'][1][1],
                               arch['blocks'][4][1], in_ch, arch['last'])
        self.token_dims = d
        self._freeze_stages()

    def init_weights(self):
        super().init_weights()
        if self.init_cfg is None or self.init_cfg.get('type') != 'Pretrained':
            trunc_normal_(self.tokens)
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    fan_out = m.kernel_size[0] * m.kernel_size[1] \
                        * m.out_channels // m.groups
                    nn.init.normal_(m.weight, 0, math.sqrt(2. / fan_out))
                elif isinstance(m, nn.Linear):
                    trunc_normal_(m.weight, std=.02)
                    nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tuple[Tensor, ...]:
        """(B, 3, H, W) -> the maps of ``out_indices``, each (B, C_l, h, w)."""
        x = self.lite(self.stem(x))
        tokens = self.tokens.expand(x.shape[0], -1, -1)
        feats = [x]
        start = 0
        for end in self._STAGE_ENDS:
            for blk in self.blocks[start:end]:
                x, tokens = blk(x, tokens)
            feats.append(x)
            start = end
        feats.append(self.last_conv(x))
        return tuple(feats[i] for i in self.out_indices)

    def _stage_modules(self, stage: int):
        if stage == 0:
            return [self.stem, self.lite]
        if stage == 4:
            return [self.last_conv]
        start = (0, ) + self._STAGE_ENDS
        return list(self.blocks[start[stage - 1]:start[stage]])

    def _freeze_stages(self):
        for stage in range(self.frozen_stages + 1):
            for m in self._stage_modules(stage):
                m.eval()
                for p in m.parameters():
                    p.requires_grad = False
        if self.frozen_stages == 4:
            self.tokens.requires_grad = False

    def train(self, mode: bool = True):
        super().train(mode)
        self._freeze_stages()
        if mode and self.norm_eval:
            for m in self.modules():
                if isinstance(m, nn.modules.batchnorm._BatchNorm):
                    m.eval()
        return self
