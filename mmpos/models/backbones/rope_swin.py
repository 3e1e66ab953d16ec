"""Swin Transformer with 2-D RoPE instead of the relative position bias
(Heo et al., "Rotary Position Embedding for Vision Transformer", Sec. 4.1).

mmpretrain's ``SwinTransformer`` is reused as is (stages, shifted windows,
patch merging, parameter names); only the window attention module is
swapped for :class:`RoPEWindowMSA`, through ``ShiftWindowMSA``'s
``window_msa`` argument. Each window is a ``ws x ws`` grid of integer
coordinates, so
attention logits inside a window depend on relative offsets only (Eq. 15),
exactly what the bias table encoded, but with no table: the window size can
be changed at inference (:meth:`RoPESwinTransformer.set_window_size`), which
is how the paper evaluates Swin at other resolutions (Fig. 5). With a cyclic
shift, tokens of one region stay contiguous inside a window, so their
relative offsets are the true ones; tokens of other regions are masked as in
Swin. A scheme's bias (LookHere, PaPE) is the bias of the window grid, added
to every window's logits (PaPE's reads the window's tokens).

As in :class:`~mmpos.models.backbones.RoPEVisionTransformer`, positions are
computed once per forward: the backbone owns one position scheme per stage
(``rope.<s>``, built from ``rope=dict(type=...)``), computes every block's
table of the ``ws x ws`` window grid and hands it to the block's
:class:`RoPEWindowMSA` (:attr:`RoPEWindowMSA.rope_table`; mmpretrain's
``SwinBlock`` passes nothing but the tokens down).
"""
import math
from copy import deepcopy
from typing import Optional, Sequence, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.model import BaseModule
from mmengine.model.weight_init import trunc_normal_
from mmpretrain.models.backbones import SwinTransformer
from mmpretrain.models.utils.attention import WindowMSA
from torch import Tensor

from mmpos_positions import TokenTable

from mmpos.registry import MODELS
from ..layers.attention import head_dims
from ..layers.positions import build_position_scheme
from ..utils.pretrained import load_backbone_pretrained, split_pretrained_cfg

DEFAULT_ROPE = dict(type='mixed')


class RoPEWindowMSA(BaseModule):
    """Window multi-head self-attention with 2-D RoPE on queries and keys.

    Drop-in for mmpretrain's ``WindowMSA`` (same arguments and parameter
    names ``qkv`` / ``proj``, no ``relative_position_bias_table``).

    Args:
        embed_dims: channels ``C``.
        window_size: ``(ws, ws)`` at construction; the forward pass reads
            the window side from the token count, so it may change later.
        num_heads: heads; ``C / num_heads`` must be a multiple of 4.
        qkv_bias, qk_scale, attn_drop, proj_drop: as ``WindowMSA``.
        use_rpb: also add Swin's relative position bias (Eq. 6), with
            ``WindowMSA``'s ``relative_position_bias_table`` (RoPE+RPB of
            the paper's Tables 2 and 4); fixes the window size.
    """

    def __init__(self,
                 embed_dims: int,
                 window_size: Sequence[int],
                 num_heads: int,
                 qkv_bias: bool = True,
                 qk_scale: Optional[float] = None,
                 attn_drop: float = 0.,
                 proj_drop: float = 0.,
                 use_rpb: bool = False,
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        self.embed_dims = embed_dims
        self.window_size = tuple(window_size)
        self.num_heads = num_heads
        self.head_dims = head_dims(embed_dims, num_heads)
        self.scale = qk_scale
        self.attn_drop = attn_drop
        self.qkv = nn.Linear(embed_dims, embed_dims * 3, bias=qkv_bias)
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop)
        #: this block's position table of the window grid, set by
        #: :meth:`RoPESwinTransformer.forward` before the stages run
        #: (``None``: no RoPE)
        self.rope_table = None
        self.use_rpb = use_rpb
        if use_rpb:  # WindowMSA's table and index (same names and layout)
            Wh, Ww = self.window_size
            self.relative_position_bias_table = nn.Parameter(
                torch.zeros((2 * Wh - 1) * (2 * Ww - 1), num_heads))
            index = WindowMSA.double_step_seq(2 * Ww - 1, Wh, 1, Ww)
            self.register_buffer('relative_position_index',
                                 (index + index.T).flip(1).contiguous())

    def init_weights(self):
        super().init_weights()
        if self.use_rpb:
            trunc_normal_(self.relative_position_bias_table, std=0.02)

    def _bias(self, N: int) -> Tensor:
        """``(heads, N, N)`` relative position bias of a window."""
        if N != self.window_size[0] * self.window_size[1]:
            raise ValueError(f'use_rpb: the bias table is for '
                             f'{self.window_size} windows, got {N} tokens')
        bias = self.relative_position_bias_table[
            self.relative_position_index.view(-1)].view(N, N, -1)
        return bias.permute(2, 0, 1)

    def forward(self, x: Tensor, mask: Optional[Tensor] = None) -> Tensor:
        """Attend within windows.

        Args:
            x: ``(num_windows * B, ws * ws, C)`` window tokens, row-major.
            mask: ``(num_windows, ws * ws, ws * ws)`` additive mask of the
                shifted windows (0 or -100, as mmpretrain builds it).

        Returns:
            ``(num_windows * B, ws * ws, C)``.
        """
        B_, N, C = x.shape
        side = math.isqrt(N)
        if side * side != N:
            raise ValueError(f'{N} tokens do not form a square window')
        qkv = self.qkv(x).reshape(B_, N, 3, self.num_heads,
                                  self.head_dims).permute(2, 0, 3, 1, 4)
        qk, v = qkv[:2], qkv[2]
        bias = self._bias(N)[None] if self.use_rpb else None
        table = self.rope_table
        if table is not None:
            if table.num_tokens != N:
                raise ValueError(f'position table for {table.num_tokens} '
                                 f'window tokens, got {N}')
            if isinstance(table, TokenTable):  # PaPE: reads the windows
                table = table.bind(x)
            qk = table.rotate(qk)
            table_bias = table.logit_bias(N, B_)  # LookHere, PaPE
            if table_bias is not None:  # (1 | B_, heads | 1, N, N)
                bias = table_bias if bias is None else bias + table_bias
        q, k = qk.unbind(0)
        attn_mask = None if bias is None else bias.to(q.dtype)
        if mask is not None:
            # (B, nW * heads, N, D) against a (1 | B, nW * heads, N, N) mask
            nW, heads = mask.shape[0], self.num_heads
            q, k, v = (t.reshape(B_ // nW, nW * heads, N, -1)
                       for t in (q, k, v))
            if attn_mask is None:
                attn_mask = 0
            elif attn_mask.shape[0] > 1:  # per window: (B, nW, heads, N, N)
                attn_mask = attn_mask.unflatten(0, (-1, nW))
            attn_mask = mask.to(q.dtype).unsqueeze(1) + attn_mask
            attn_mask = attn_mask.expand(*attn_mask.shape[:-3], heads, N,
                                         N).reshape(-1, nW * heads, N, N)
        x = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask,
            dropout_p=self.attn_drop if self.training else 0.,
            scale=self.scale)
        x = x.reshape(B_, self.num_heads, N, -1).transpose(1, 2)
        return self.proj_drop(self.proj(x.reshape(B_, N, C)))


@MODELS.register_module()
class RoPESwinTransformer(SwinTransformer):
    """Swin Transformer whose window attention uses RoPE-Axial / RoPE-Mixed
    in place of the relative position bias (the paper's RoPE Swin).

    Arguments are those of mmpretrain's ``SwinTransformer`` plus:

    Args:
        window_size: one side for all stages or one per stage.
        rope: the position scheme, ``dict(type='mixed' | 'axial', ...)`` of
            :data:`mmpos.registry.POSITION_ENCODINGS` (any of them: its
            rotation and bias), one per stage, or
            ``None`` (with ``use_rpb=True``: Swin itself, the RPB
            baseline).
        use_rpb: keep Swin's relative position bias next to RoPE
            (RoPE+RPB); its tables load from Swin checkpoints and the window
            size can then not change.

    The RoPE-Mixed frequencies of stage ``i``'s block ``j`` are
    ``rope.<i>.freqs.<j>`` (per head; ``get_layer_depth`` gives them the
    block's depth). Without ``use_rpb`` the checkpoints hold no position
    table, so the same weights run with any window size
    (:meth:`set_window_size`). The paper's
    five Swin schemes are ``rope`` x ``use_rpb``: RPB = ``(None, True)``,
    Axial / Mixed = ``(dict(type='axial' | 'mixed'), False)``, Axial+RPB /
    Mixed+RPB = ``(dict(type='axial' | 'mixed'), True)``.
    """

    def __init__(self,
                 *args,
                 window_size: Union[int, Sequence[int]] = 7,
                 rope: Optional[dict] = DEFAULT_ROPE,
                 use_rpb: bool = False,
                 stage_cfgs: Union[dict, Sequence[dict]] = dict(),
                 init_cfg=None,
                 **kwargs):
        # A `Pretrained` entry is loaded by init_weights with mmpos' checks.
        init_cfg, pretrained_cfg = split_pretrained_cfg(init_cfg, None)
        rope_attn = dict(window_msa=RoPEWindowMSA, use_rpb=use_rpb)
        if isinstance(stage_cfgs, dict):
            stage_cfgs = _with_attn(stage_cfgs, rope_attn)
        else:
            stage_cfgs = [_with_attn(cfg, rope_attn) for cfg in stage_cfgs]
        sizes = ([window_size] * 4 if isinstance(window_size, int) else
                 list(window_size))
        super().__init__(*args, window_size=sizes[0], stage_cfgs=stage_cfgs,
                         init_cfg=init_cfg, **kwargs)
        self.pretrained_cfg = pretrained_cfg
        self.rope = None if rope is None else nn.ModuleList(
            build_position_scheme(rope, stage.blocks[0].attn.w_msa.head_dims,
                                  stage.blocks[0].attn.w_msa.num_heads,
                                  len(stage.blocks))
            for stage in self.stages)
        self.set_window_size(window_size)

    def get_layer_depth(self, param_name: str, prefix: str = ''):
        """mmpretrain's Swin depths; block ``j`` of stage ``i``'s RoPE-Mixed
        frequencies ``rope.<i>.freqs.<j>`` get that block's depth."""
        name = param_name[len(prefix):]
        if param_name.startswith(prefix) and name.startswith('rope.'):
            _, i, _, j = name.split('.')
            param_name = f'{prefix}stages.{i}.blocks.{j}.attn.w_msa.qkv'
        return super().get_layer_depth(param_name, prefix)

    def forward(self, x: Tensor):
        """mmpretrain's forward, after handing every block its table of the
        ``ws x ws`` window grid (computed once per forward)."""
        for s, stage in enumerate(self.stages):
            tables = [None] * len(stage.blocks)
            if self.rope is not None:
                ws = stage.blocks[0].attn.window_size
                tables = self.rope[s](None, (ws, ws), 1, device=x.device,
                                      dtype=torch.promote_types(
                                          x.dtype, torch.float32))
            for block, table in zip(stage.blocks, tables):
                block.attn.w_msa.rope_table = table
        return super().forward(x)

    def init_weights(self):
        """Swin's init, then the ``Pretrained`` checkpoint of ``init_cfg``
        (``dict(type='Pretrained', checkpoint=PATH, prefix='backbone.')``)
        over it with
        :func:`~mmpos.models.utils.pretrained.load_backbone_pretrained`
        (``checkpoint=None``: random init, logged as a warning)."""
        super().init_weights()
        if self.pretrained_cfg is not None:
            load_backbone_pretrained(self, self.pretrained_cfg)

    @property
    def window_size(self) -> list:
        """Window side per stage."""
        return [stage.blocks[0].attn.window_size for stage in self.stages]

    def set_window_size(self, window_size: Union[int, Sequence[int]]):
        """Use windows of ``window_size`` (one int, or one per stage) from
        now on; shifted blocks shift by half the new window. Nothing is
        resized or re-initialised."""
        sizes = ([window_size] * len(self.stages) if isinstance(
            window_size, int) else list(window_size))
        if len(sizes) != len(self.stages) or min(sizes) < 1:
            raise ValueError(f'window_size must be a positive int or one per '
                             f'stage ({len(self.stages)}), got {window_size}')
        msa = self.stages[0].blocks[0].attn.w_msa
        if msa.use_rpb and any(
                (s, s) != stage.blocks[0].attn.w_msa.window_size
                for s, stage in zip(sizes, self.stages)):
            raise ValueError('use_rpb=True: the bias tables fix the window '
                             'size; build a new model for another one')
        for stage, size in zip(self.stages, sizes):
            for index, block in enumerate(stage.blocks):
                block.attn.window_size = size
                block.attn.shift_size = size // 2 if index % 2 else 0
                block.attn.w_msa.window_size = (size, size)
        return self


def _with_attn(stage_cfg: dict, rope_attn: dict) -> dict:
    """``stage_cfg`` whose blocks build :class:`RoPEWindowMSA` (user
    ``attn_cfgs`` keys are kept)."""
    stage_cfg = deepcopy(dict(stage_cfg))
    block_cfgs = stage_cfg.get('block_cfgs', dict())
    if isinstance(block_cfgs, dict):
        block_cfgs = dict(block_cfgs)
        block_cfgs['attn_cfgs'] = {**rope_attn,
                                   **block_cfgs.get('attn_cfgs', {})}
    else:
        block_cfgs = [{**cfg, 'attn_cfgs': {**rope_attn,
                                            **cfg.get('attn_cfgs', {})}}
                      for cfg in block_cfgs]
    stage_cfg['block_cfgs'] = block_cfgs
    return stage_cfg
