"""CR2PQ position-aware cross-attention (Eq. 8) with local and global
projectors (§3.2, Table 5)."""
from typing import Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmcv.cnn.bricks.transformer import FFN
from mmengine.model import BaseModule, ModuleList
from mmengine.model.weight_init import trunc_normal_
from mmpretrain.models.utils import build_norm_layer
from torch import Tensor

from mmpos_positions import adds_bias

from mmpos.registry import MODELS
from ...backbones.rope_vit import RoPETransformerEncoderLayer
from ...layers.attention import head_dims
from ...layers.positions import (PositionTable, build_position_scheme,
                                 grid_coords, sincos_pos_embed_2d)

POS_TYPES = ('rope', 'sincos', 'mlp')
PROJECTORS = ('transformer', 'mlp')


def _mlp(in_channels: int, hidden_channels: int, out_channels: int,
         num_layers: int) -> nn.Sequential:
    """``num_layers`` linear layers with GELU between them."""
    if num_layers < 1:
        raise ValueError(f'an MLP needs >= 1 layer, got {num_layers}')
    dims = [in_channels] + [hidden_channels] * (num_layers - 1) + \
        [out_channels]
    layers = []
    for i, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:])):
        if i:
            layers.append(nn.GELU())
        layers.append(nn.Linear(d_in, d_out))
    return nn.Sequential(*layers)


class RoPECrossAttention(BaseModule):
    """Multi-head cross-attention with RoPE on both sides (Eq. 8).

    ``softmax((R(c_q) q W_Q)^T (R(c_k) k W_K) / sqrt(D)) (k W_V)``, then
    ``W_O``: queries rotated at their (continuous) coordinates ``c_q``, keys
    at theirs ``c_k`` (Eq. 5/6; the tables of :class:`CR2PQNeck`'s
    position scheme), so every logit depends on
    ``c_q - c_k``. The ``1 / sqrt(D)`` scale (standard attention, absent from
    Eq. 7/8 as printed) is kept.

    Args:
        embed_dims: channels ``C``.
        num_heads: heads (``C / num_heads`` a multiple of 4 for RoPE).
        qkv_bias: biases of ``W_Q``, ``W_K``, ``W_V``.
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 qkv_bias: bool = True,
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        self.num_heads = num_heads
        self.head_dims = head_dims(embed_dims, num_heads)
        self.q = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.kv = nn.Linear(embed_dims, 2 * embed_dims, bias=qkv_bias)
        self.proj = nn.Linear(embed_dims, embed_dims)

    def forward(self,
                query: Tensor,
                context: Tensor,
                query_rope: Optional[PositionTable] = None,
                context_rope: Optional[PositionTable] = None) -> Tensor:
        """
        Args:
            query: ``(B, N_q, C)``.
            context: ``(B, N_k, C)`` keys/values source.
            query_rope, context_rope: tables of the queries' and the keys'
                positions (``None``: not rotated).

        Returns:
            ``(B, N_q, C)``.
        """
        B, Nq, C = query.shape
        q = self.q(query).reshape(B, Nq, self.num_heads,
                                  self.head_dims).transpose(1, 2)
        k, v = self.kv(context).reshape(B, -1, 2, self.num_heads,
                                        self.head_dims).permute(2, 0, 3, 1, 4)
        if query_rope is not None:
            q = query_rope.rotate(q)
        if context_rope is not None:
            k = context_rope.rotate(k)
        x = F.scaled_dot_product_attention(q, k, v)
        return self.proj(x.transpose(1, 2).reshape(B, Nq, C))


@MODELS.register_module()
class CR2PQNeck(BaseModule):
    """Positional query of view B from view A's tokens, then projectors.

    1. Query tokens (Eq. 8): the learnable ``h_mask`` at every one of B's
       ``N_B`` positions. Eq. 8 writes ``Phi = (q^{(m,n)} + h_mask) W_Q``;
       view B has no student tokens, so we read it as ``h_mask W_Q`` (the
       issue's reading): the query content is shared and only the rotation
       at B's relative coordinates (Eq. 6) distinguishes the positions.
    2. One pre-norm cross-attention block ``h = x + CA(LN(x), LN(h_A))``,
       ``h = h + FFN(LN(h))``, keys/values from A's patch tokens on A's grid
       (class token excluded, as Eq. 8 sums over A's grid only).
    3. Local projector ``g_gamma`` -> ``z_B`` ``(B, N_B, out_channels)``:
       ``'transformer'`` (Table 5 default: ``local_depth`` pre-norm RoPE
       blocks over B's tokens at B's coordinates, then LN + Linear) or
       ``'mlp'`` (``local_depth`` linear layers).
    4. Global projector ``g'_gamma`` (Eq. 10, 2-layer MLP) on the mean of
       ``h`` over B's tokens -> ``(B, out_channels)``.

    Positions (``pos_type``, Table 6 with :class:`CR2PQ`'s ``mask_ratio``):

    * ``'rope'``: 2-D RoPE (Eq. 5/6) on queries and keys, no additive
      embedding: continuous RoPE at Eq. 4's coordinates (default), or, in
      the masked single-view variant, discrete RoPE at integer grid
      positions.
    * ``'sincos'``: no rotation; fixed 2-D sin-cos embeddings of the
      query coordinates (continuous, or integer when masked) added to the
      queries and of A's token positions to A's tokens (the backbone should
      then use sin-cos APE instead of RoPE).
    * ``'mlp'``: as ``'sincos'`` with a learnable 2-layer MLP ``(x, y) ->
      C`` (the paper's "learnable" row).

    Args:
        embed_dims: student width ``C``.
        num_heads: heads of the cross-attention and local blocks.
        out_channels: teacher/target channels ``D_tea``.
        pos_type: see above.
        rope: the position scheme of ``pos_type='rope'``, a
            :data:`mmpos.registry.POSITION_ENCODINGS` config as the
            backbone's ``rope`` (default axial with base 100 = Eq. 5's
            ``10000^{-t/(D/2)}``).
        mlp_ratio: FFN width of the blocks relative to ``C``.
        local_projector: ``'transformer'`` or ``'mlp'``.
        local_depth: blocks / layers of the local projector (2).
        hidden_channels: hidden width of the MLP projectors.
        global_depth: layers of the global projector (2).
        share_weights: Table 5 "Share weights": the global and the local
            projector are one MLP (``local_projector='mlp'`` with
            ``local_depth == global_depth``), applied to each of B's tokens
            and to their mean.
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 out_channels: int,
                 pos_type: str = 'rope',
                 rope: dict = dict(type='axial', theta=100.),
                 mlp_ratio: float = 4.,
                 local_projector: str = 'transformer',
                 local_depth: int = 2,
                 hidden_channels: int = 2048,
                 global_depth: int = 2,
                 share_weights: bool = False,
                 norm_cfg: dict = dict(type='LN', eps=1e-6),
                 init_cfg: Optional[dict] = dict(
                     type='TruncNormal', layer='Linear', std=.02, bias=0.)):
        super().__init__(init_cfg=init_cfg)
        if pos_type not in POS_TYPES:
            raise ValueError(f'pos_type must be one of {POS_TYPES}, '
                             f'got {pos_type!r}')
        if local_projector not in PROJECTORS:
            raise ValueError(f'local_projector must be one of {PROJECTORS},'
                             f' got {local_projector!r}')
        self.pos_type = pos_type
        self.embed_dims = embed_dims
        self.rotary = pos_type == 'rope'
        ffn_dims = int(embed_dims * mlp_ratio)

        self.mask_token = nn.Parameter(torch.zeros(1, 1, embed_dims))
        self.pos_mlp = (_mlp(2, embed_dims, embed_dims, 2)
                        if pos_type == 'mlp' else None)
        self.norm_query = build_norm_layer(norm_cfg, embed_dims)
        self.norm_context = build_norm_layer(norm_cfg, embed_dims)
        self.cross_attn = RoPECrossAttention(embed_dims, num_heads)
        self.norm_ffn = build_norm_layer(norm_cfg, embed_dims)
        self.ffn = FFN(embed_dims=embed_dims, feedforward_channels=ffn_dims,
                       act_cfg=dict(type='GELU'))

        if local_projector == 'transformer':
            self.local_blocks = ModuleList(
                RoPETransformerEncoderLayer(
                    embed_dims, num_heads, ffn_dims, norm_cfg=norm_cfg)
                for _ in range(local_depth))
            self.local_head = nn.Sequential(
                build_norm_layer(norm_cfg, embed_dims),
                nn.Linear(embed_dims, out_channels))
        else:
            self.local_blocks = ModuleList()
            self.local_head = _mlp(embed_dims, hidden_channels, out_channels,
                                   local_depth)
        if share_weights and (local_projector != 'mlp'
                              or local_depth != global_depth):
            raise ValueError(
                f"share_weights needs local_projector='mlp' with local_depth "
                f'== global_depth, got {local_projector!r} with '
                f'{local_depth} / {global_depth}')
        self.share_weights = share_weights
        # block 0: the cross-attention, block 1 + i: local block i
        self.rope = build_position_scheme(
            rope if self.rotary else None,
            head_dims(embed_dims, num_heads), num_heads,
            1 + len(self.local_blocks))
        if self.rope is not None and adds_bias(self.rope):
            raise ValueError(
                f'CR2PQNeck: rope type {rope["type"]!r} adds an attention '
                'bias between the positions of one token set; the '
                "cross-attention (Eq. 8) relates two views' positions by "
                'rotations only: use a rotary scheme')
        self.global_projector = self.local_head if share_weights else _mlp(
            embed_dims, hidden_channels, out_channels, global_depth)

    def init_weights(self):
        super().init_weights()
        trunc_normal_(self.mask_token, std=.02)

    def _pos_embed(self, coords: Tensor) -> Tensor:
        if self.pos_type == 'sincos':
            return sincos_pos_embed_2d(coords, self.embed_dims)
        return self.pos_mlp(coords)

    def forward(self,
                tokens_a: Tensor,
                hw_a: Sequence[int],
                coords_b: Tensor,
                coords_a: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        """
        Args:
            tokens_a: ``(B, N_A, C)`` student patch tokens of view A.
            hw_a: A's grid ``(K_A^H, K_A^W)``.
            coords_b: ``(B, N_B, 2)`` ``(x, y)`` query positions in A's grid:
                B's relative coordinates (Eq. 4), or the masked patches.
            coords_a: ``(B, N_A, 2)`` positions of ``tokens_a`` when they are
                not the whole ``hw_a`` grid in row-major order (the visible
                patches of the masked variant); ``None``: the grid.

        Returns:
            ``z_B`` ``(B, N_B, out_channels)`` and the global projection
            ``(B, out_channels)``.
        """
        query = self.mask_token.expand(*coords_b.shape[:2], -1)
        context = tokens_a
        if not self.rotary:
            if coords_a is None:
                coords_a = grid_coords(*hw_a, device=tokens_a.device)
            query = query + self._pos_embed(coords_b).to(query.dtype)
            context = context + self._pos_embed(coords_a).to(context.dtype)
        tables, context_rope = [None] * (1 + len(self.local_blocks)), None
        if self.rope is not None:
            dtype = torch.promote_types(query.dtype, torch.float32)
            if coords_a is None:
                coords_a = grid_coords(*hw_a, device=tokens_a.device)
            coords_a, coords_b = (
                (c if c.dim() == 3 else c[None]).to(tokens_a.device, dtype)
                for c in (coords_a, coords_b))
            tables = self.rope.tables(coords_b)  # queries, every block
            context_rope = self.rope.block_table(0, coords_a)
        h = query + self.cross_attn(
            self.norm_query(query), self.norm_context(context),
            query_rope=tables[0], context_rope=context_rope)
        h = self.ffn(self.norm_ffn(h), identity=h)
        z = h
        for block, table in zip(self.local_blocks, tables[1:]):
            z = block(z, rope=table)
        return self.local_head(z), self.global_projector(h.mean(1))


__all__ = ['CR2PQNeck', 'RoPECrossAttention']
