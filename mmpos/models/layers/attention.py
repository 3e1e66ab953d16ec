"""Multi-head self-attention that applies a block's position table."""
from typing import Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmcv.cnn.bricks.drop import build_dropout
from mmengine.model import BaseModule
from mmpretrain.models.utils import LayerScale
from torch import Tensor

from mmpos_positions import PositionTable, TokenTable


def head_dims(embed_dims: int, num_heads: int) -> int:
    """Channels per head, ``embed_dims / num_heads``; a clear error when
    ``num_heads`` does not divide ``embed_dims``."""
    if embed_dims % num_heads:
        raise ValueError(f'embed_dims {embed_dims} is not divisible by '
                         f'num_heads {num_heads}')
    return embed_dims // num_heads


def resize_rel_pos(table: Tensor, length: int) -> Tensor:
    """A relative-position table ``(L, D)`` linearly interpolated to
    ``(length, D)`` (as ViTDet does for a grid other than the one it was
    built for); the table itself when ``L == length``."""
    if table.shape[0] == length:
        return table
    return F.interpolate(
        table.t()[None], size=length, mode='linear')[0].t()


def decomposed_rel_pos_bias(q: Tensor, rel_pos_h: Tensor, rel_pos_w: Tensor,
                            hw: Tuple[int, int]) -> Tensor:
    """ViTDet's decomposed relative position bias (after MViTv2): the logit
    of query ``i`` at ``(y_i, x_i)`` and key ``j`` gains
    ``q_i . Rh[y_i - y_j] + q_i . Rw[x_i - x_j]``.

    Args:
        q: ``(B, heads, H * W, D)`` queries (before the softmax scale), the
            tokens of the ``hw = (H, W)`` grid row-major.
        rel_pos_h, rel_pos_w: ``(Lh, D)`` / ``(Lw, D)`` tables over the
            offsets ``-(H - 1) .. H - 1`` (resized to ``2H - 1`` /
            ``2W - 1`` rows by :func:`resize_rel_pos` when built for
            another grid).

    Returns:
        ``(B, heads, H * W, H * W)`` additive attention bias.
    """
    H, W = hw
    B, heads, N, D = q.shape
    rh = resize_rel_pos(rel_pos_h, 2 * H - 1)
    rw = resize_rel_pos(rel_pos_w, 2 * W - 1)
    ys = torch.arange(H, device=q.device)
    xs = torch.arange(W, device=q.device)
    rh = rh[ys[:, None] - ys[None, :] + H - 1]  # (H, H, D): query row, key
    rw = rw[xs[:, None] - xs[None, :] + W - 1]  # (W, W, D)
    q = q.reshape(B, heads, H, W, D)
    bias_h = torch.einsum('bnyxd,ykd->bnyxk', q, rh.to(q.dtype))
    bias_w = torch.einsum('bnyxd,xkd->bnyxk', q, rw.to(q.dtype))
    bias = bias_h[..., :, None] + bias_w[..., None, :]  # (B, n, H, W, H, W)
    return bias.reshape(B, heads, N, N)


class RoPEAttention(BaseModule):
    """Multi-head self-attention whose queries and keys are rotated by the
    block's position table (RoPE) and whose logits get its bias, if any.

    Parameter names follow mmpretrain's ``MultiheadAttention`` (``qkv``,
    ``proj``, ``gamma1``), so ViT checkpoints load unchanged. The position
    scheme and its parameters live in the backbone
    (:mod:`mmpos_positions`), which hands :meth:`forward` a
    :class:`~mmpos_positions.PositionTable`.

    Args:
        embed_dims: channels ``C``.
        num_heads: heads.
        qkv_bias: learnable bias of the qkv projection.
        attn_drop: dropout on the attention probabilities (training only).
        proj_drop: dropout after the output projection.
        dropout_layer: config of the residual-branch dropout, e.g.
            ``dict(type='DropPath', drop_prob=0.1)``; ``None`` = identity.
        layer_scale_init_value: LayerScale init; 0 disables it.
        rel_pos_size: ``(h, w)``: add ViTDet's decomposed relative position
            bias (:func:`decomposed_rel_pos_bias`) with tables ``rel_pos_h``
            ``(2h - 1, D)`` and ``rel_pos_w`` ``(2w - 1, D)`` (zero init, as
            ViTDet), interpolated to other grids; ``forward`` then needs
            ``hw`` covering all tokens. It reads the queries before RoPE.
            ``None``: no bias.
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 qkv_bias: bool = True,
                 attn_drop: float = 0.,
                 proj_drop: float = 0.,
                 dropout_layer: Optional[dict] = None,
                 layer_scale_init_value: float = 0.,
                 rel_pos_size: Optional[Tuple[int, int]] = None,
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
        if rel_pos_size is not None:
            h, w = rel_pos_size
            self.rel_pos_h = nn.Parameter(torch.zeros(2 * h - 1,
                                                      self.head_dims))
            self.rel_pos_w = nn.Parameter(torch.zeros(2 * w - 1,
                                                      self.head_dims))
        self.use_rel_pos = rel_pos_size is not None

    def attention_inputs(self,
                         x: Tensor,
                         rope: Optional[PositionTable] = None,
                         hw: Optional[Sequence[int]] = None,
                         key_mask: Optional[Tensor] = None
                         ) -> Tuple[Tensor, Tensor, Tensor, Optional[Tensor]]:
        """The queries, keys and values ``(B, heads, N, D)`` of ``x``
        ``(B, N, C)`` and the ``attn_mask`` of :meth:`forward`'s
        ``F.scaled_dot_product_attention`` call: ``None``, an additive
        ``(B | 1, heads | 1, N, N)`` bias or a boolean ``(B, 1, 1, N)``
        mask (``True``: attend). Arguments as :meth:`forward`."""
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads,
                                  self.head_dims).permute(2, 0, 3, 1, 4)
        qk, v = qkv[:2], qkv[2]  # (2, B, heads, N, D), (B, heads, N, D)
        bias = None
        if self.use_rel_pos:
            if hw is None or hw[0] * hw[1] != N:
                raise ValueError(f'the relative position bias needs the '
                                 f'grid of all {N} tokens, got hw={hw}')
            bias = decomposed_rel_pos_bias(qk[0], self.rel_pos_h,
                                           self.rel_pos_w, hw)
        if rope is not None:
            if isinstance(rope, TokenTable):  # PaPE's bias reads the tokens
                rope = rope.bind(x)
            qk = rope.rotate(qk)
            if rope.attn_bias is not None:  # prefix rows/columns: no bias
                table_bias = rope.logit_bias(N, B).to(qk.dtype)
                bias = table_bias if bias is None else bias + table_bias
        if key_mask is not None:
            keep = key_mask[:, None, None, :]  # (B, 1, 1, N)
            bias = keep if bias is None else bias.masked_fill(
                ~keep, float('-inf'))
        q, k = qk.unbind(0)
        return q, k, v, bias

    def forward(self,
                x: Tensor,
                rope: Optional[PositionTable] = None,
                hw: Optional[Sequence[int]] = None,
                key_mask: Optional[Tensor] = None) -> Tensor:
        """Attend over ``x`` of shape ``(B, N, C)``; returns ``(B, N, C)``.

        ``rope`` positions the last ``M`` tokens (its ``rotate`` leaves the
        first ``N - M``, class and register tokens, unrotated; its
        ``attn_bias`` ``(n, heads | 1, M, M)`` is added to their logits);
        ``None``: no positions. The relative position bias
        (``rel_pos_size``) needs ``hw`` with ``N = H * W``. ``key_mask``
        ``(B, N)`` bool, ``False`` for padding tokens (NaFlex batches): no
        query attends to them (a boolean SDPA mask, or ``-inf`` added to
        the bias); ``None``: every token is a key.
        """
        B, N, C = x.shape
        q, k, v, bias = self.attention_inputs(x, rope, hw, key_mask)
        x = F.scaled_dot_product_attention(
            q, k, v, attn_mask=bias,
            dropout_p=self.attn_drop if self.training else 0.)
        x = self.proj(x.transpose(1, 2).reshape(B, N, C))
        return self.out_drop(self.gamma1(self.proj_drop(x)))
