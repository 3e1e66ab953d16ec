"""Multi-head self-attention with 2-D rotary position embedding."""
from typing import Optional, Sequence

import torch.nn as nn
import torch.nn.functional as F
from mmcv.cnn.bricks.drop import build_dropout
from mmengine.model import BaseModule
from mmpretrain.models.utils import LayerScale
from torch import Tensor

from .rope import RoPE2D


def head_dims(embed_dims: int, num_heads: int) -> int:
    """Channels per head, ``embed_dims / num_heads``; a clear error when
    ``num_heads`` does not divide ``embed_dims``."""
    if embed_dims % num_heads:
        raise ValueError(f'embed_dims {embed_dims} is not divisible by '
                         f'num_heads {num_heads}')
    return embed_dims // num_heads


class RoPEAttention(BaseModule):
    """Multi-head self-attention whose queries and keys are rotated by RoPE.

    Parameter names follow mmpretrain's ``MultiheadAttention`` (``qkv``,
    ``proj``, ``gamma1``), so ViT checkpoints load unchanged; RoPE-Mixed adds
    the learnable frequencies ``rope.freqs`` of shape ``(2, heads, D/2)``.

    Args:
        embed_dims: channels ``C``.
        num_heads: heads; ``C / num_heads`` must be a multiple of 4 for RoPE.
        rope_type: ``'axial'``, ``'mixed'`` or ``'none'`` (plain attention).
        rope_theta: RoPE frequency base; ``None`` = 100 (axial) / 10 (mixed).
        qkv_bias: learnable bias of the qkv projection.
        attn_drop: dropout on the attention probabilities (training only).
        proj_drop: dropout after the output projection.
        dropout_layer: config of the residual-branch dropout, e.g.
            ``dict(type='DropPath', drop_prob=0.1)``; ``None`` = identity.
        layer_scale_init_value: LayerScale init; 0 disables it.
        rope_cfg: further :class:`RoPE2D` options (``periods``, ``axes``,
            ``layout``); ``None``: its defaults.
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 rope_type: str = 'mixed',
                 rope_theta: Optional[float] = None,
                 qkv_bias: bool = True,
                 attn_drop: float = 0.,
                 proj_drop: float = 0.,
                 dropout_layer: Optional[dict] = None,
                 layer_scale_init_value: float = 0.,
                 rope_cfg: Optional[dict] = None,
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.head_dims = head_dims(embed_dims, num_heads)
        self.attn_drop = attn_drop

        self.qkv = nn.Linear(embed_dims, embed_dims * 3, bias=qkv_bias)
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop)
        self.out_drop = (build_dropout(dropout_layer)
                         if dropout_layer else nn.Identity())
        self.gamma1 = (LayerScale(embed_dims, layer_scale_init_value)
                       if layer_scale_init_value > 0 else nn.Identity())
        self.rope = (None if rope_type == 'none' else RoPE2D(
            self.head_dims, num_heads, rope_type, rope_theta,
            **(rope_cfg or {})))

    def forward(self,
                x: Tensor,
                coords: Optional[Tensor] = None,
                hw: Optional[Sequence[int]] = None) -> Tensor:
        """Attend over ``x`` of shape ``(B, N, C)``; returns ``(B, N, C)``.

        ``coords`` (``(M, 2)`` or ``(B, M, 2)``) or ``hw`` (grid of
        ``M = H * W``) position the last ``M`` tokens; the first ``N - M``
        (class token) are not rotated. Both are ignored when
        ``rope_type='none'``.
        """
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads,
                                  self.head_dims).permute(2, 0, 3, 1, 4)
        qk, v = qkv[:2], qkv[2]  # (2, B, heads, N, D), (B, heads, N, D)
        if self.rope is not None:
            qk = self.rope(qk, coords=coords, hw=hw)
        q, k = qk.unbind(0)
        x = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.attn_drop if self.training else 0.)
        x = self.proj(x.transpose(1, 2).reshape(B, N, C))
        return self.out_drop(self.gamma1(self.proj_drop(x)))
