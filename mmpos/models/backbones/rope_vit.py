"""Plain ViT with 2-D rotary position embedding (Heo et al., ECCV 2024).

RoPE-Axial / RoPE-Mixed replace (or, with ``use_ape=True``, complement) the
absolute position embedding. Module and parameter names mirror mmpretrain's
``VisionTransformer`` (``patch_embed.projection``, ``cls_token``,
``pos_embed``, ``layers.<i>.{ln1,attn,ln2,ffn}``, final ``ln1``), so its
checkpoints, ``get_layer_depth`` and layer-wise lr decay apply unchanged.

Positions are computed once per forward: the backbone owns one position
scheme :attr:`~RoPEVisionTransformer.rope` (built from ``rope=dict(type=...)``
of :data:`mmpos.registry.POSITION_ENCODINGS`), which returns one table per
block, and the block loop runs ``layer(x, rope=tables[i], hw=hw)`` (as timm's
Eva and DINOv3). The per-block, per-head RoPE-Mixed frequencies are
``rope.freqs.<i>``; ``get_layer_depth`` gives them block ``i``'s depth, so
they share its lr scale.
"""
import math
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as cp
from mmcv.cnn.bricks.drop import build_dropout
from mmcv.cnn.bricks.transformer import FFN, PatchEmbed
from mmengine.model import BaseModule, ModuleList
from mmengine.model.weight_init import trunc_normal_
from mmpretrain.models.backbones.base_backbone import BaseBackbone
from mmpretrain.models.utils import (build_norm_layer, resize_pos_embed,
                                     to_2tuple)
from torch import Tensor

from mmpos_positions import (CachedTables, FrozenTables, PositionTable,
                             grid_coords, sincos_pos_embed_2d)
from mmpos_positions.window import window_partition, window_unpartition

from mmpos.registry import MODELS
from ..layers.attention import RoPEAttention
from ..layers.masking import gather_tokens
from ..layers.positions import build_position_scheme
from ..utils.pretrained import load_backbone_pretrained, split_pretrained_cfg

DEFAULT_ROPE = dict(type='mixed')

# DeiT's initialisation: truncated normal linear layers, unit LayerNorms.
DEIT_INIT_CFG = [
    dict(type='TruncNormal', layer='Linear', std=.02, bias=0.),
    dict(type='Constant', layer='LayerNorm', val=1., bias=0.)
]


class RoPETransformerEncoderLayer(BaseModule):
    """Pre-norm ViT block whose attention applies its position table.

    ``x = x + attn(ln1(x)); x = x + ffn(ln2(x))`` on ``(B, N, C)`` tokens.
    Arguments as mmpretrain's ``TransformerEncoderLayer`` plus
    ``window_size``: ``0`` attends globally; ``ws > 0`` attends inside the
    ``ws x ws`` windows of the zero-padded patch grid (ViTDet), its table
    then positions the tokens of every window
    (:meth:`~mmpos_positions.PositionScheme.forward`).
    Drop-path then acts on whole images after the windows are merged, as in
    ViTDet.
    ``rel_pos_size``: ViTDet's decomposed relative position bias (see
    :class:`RoPEAttention`), over the window or the grid.
    ``ffn_cfg``: the feed-forward layer, a registered type built with
    ``embed_dims``, ``feedforward_channels`` (its hidden width),
    ``layer_scale_init_value``, the drop-path ``dropout_layer`` and the
    keys it gives, e.g. ``dict(type='SwiGLUFFN')`` (mmpretrain's SwiGLU,
    DINOv3's 7B; registered by :mod:`mmpos.models.layers`); ``None``: the
    GELU MLP (mmcv's ``FFN`` with ``act_cfg`` and ``drop_rate``).
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 feedforward_channels: int,
                 layer_scale_init_value: float = 0.,
                 drop_rate: float = 0.,
                 attn_drop_rate: float = 0.,
                 drop_path_rate: float = 0.,
                 qkv_bias: bool = True,
                 act_cfg: dict = dict(type='GELU'),
                 norm_cfg: dict = dict(type='LN'),
                 window_size: int = 0,
                 rel_pos_size: Optional[Sequence[int]] = None,
                 ffn_cfg: Optional[dict] = None,
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        drop_path = dict(type='DropPath', drop_prob=drop_path_rate)
        self.window_size = window_size
        self.window_drop_path = (build_dropout(drop_path)
                                 if window_size else None)
        self.ln1 = build_norm_layer(norm_cfg, embed_dims)
        self.attn = RoPEAttention(
            embed_dims,
            num_heads,
            qkv_bias=qkv_bias,
            attn_drop=attn_drop_rate,
            proj_drop=drop_rate,
            dropout_layer=None if window_size else drop_path,
            layer_scale_init_value=layer_scale_init_value,
            rel_pos_size=rel_pos_size)
        self.ln2 = build_norm_layer(norm_cfg, embed_dims)
        self.ffn = FFN(
            embed_dims=embed_dims,
            feedforward_channels=feedforward_channels,
            ffn_drop=drop_rate,
            dropout_layer=drop_path,
            act_cfg=act_cfg,
            layer_scale_init_value=layer_scale_init_value
        ) if ffn_cfg is None else MODELS.build(dict(
            ffn_cfg, embed_dims=embed_dims,
            feedforward_channels=feedforward_channels,
            dropout_layer=drop_path,
            layer_scale_init_value=layer_scale_init_value))

    def forward(self,
                x: Tensor,
                rope: Optional[PositionTable] = None,
                hw: Optional[Sequence[int]] = None,
                key_mask: Optional[Tensor] = None) -> Tensor:
        """``x`` ``(B, N, C)``; ``rope``: this block's table (of the
        windows' tokens for a windowed block); ``hw``: the patch grid;
        ``key_mask``: ``(B, N)`` bool, ``False`` for padding tokens (global
        blocks only: a padded sequence has no grid to cut into windows)."""
        if self.window_size and key_mask is not None:
            raise ValueError('window attention needs the patch grid; a '
                             'padded NaFlex sequence has none (window_size '
                             f'{self.window_size})')
        if self.window_size:
            if hw is None:
                raise ValueError('window attention needs the patch grid `hw`')
            ws = self.window_size
            windows = self.attn(window_partition(self.ln1(x), hw, ws),
                                rope=rope, hw=(ws, ws))
            x = x + self.window_drop_path(window_unpartition(windows, hw, ws))
        else:
            x = x + self.attn(self.ln1(x), rope=rope, hw=hw,
                              key_mask=key_mask)
        return self.ffn(self.ln2(x), identity=x)


def naflex_grids(patch_coord: Tensor, valid: Tensor) -> Tensor:
    """Each NaFlex sample's patch grid ``(h, w)``, ``(B, 2)`` long: its
    largest valid ``(y, x)`` coordinate (``patch_coord`` ``(B, N, 2)``,
    ``valid`` ``(B, N)``) + 1."""
    return patch_coord.masked_fill(~valid[..., None], -1).amax(1).long() + 1


def naflex_featmaps(tokens: Tensor, patch_coord: Tensor, valid: Tensor,
                    num_prefix: int) -> List[Tensor]:
    """Each NaFlex sample's patch-token map: ``'raw'`` tokens ``(B, P + N,
    C)`` (``P = num_prefix`` class and register tokens first) -> ``[(C,
    h_b, w_b), ...]``, every valid patch at its ``(y, x)`` of the sample's
    grid (:func:`naflex_grids`), padding left out."""
    maps = []
    for b, (h, w) in enumerate(naflex_grids(patch_coord, valid).tolist()):
        keep = valid[b].bool()
        y, x = patch_coord[b, keep].unbind(-1)
        grid = tokens.new_zeros(h * w, tokens.shape[-1])
        grid[y * w + x] = tokens[b, num_prefix:][keep]
        maps.append(grid.T.reshape(-1, h, w))
    return maps


@MODELS.register_module()
class RoPEVisionTransformer(BaseBackbone):
    """ViT with a position scheme (RoPE-Axial / RoPE-Mixed by default);
    with ``rope=None, use_ape=True`` mmpretrain's ``VisionTransformer``
    (same arguments, parameter names, padding and outputs).

    Args:
        arch: ``'tiny' | 'small' | 'base' | 'large'`` (ViT-T/S/B/L as in
            DeiT / the paper), ``'7b'`` (DINOv3's ViT-7B: 4096 wide, 40
            blocks, 32 heads, with a SwiGLU ``ffn_cfg`` of hidden width
            8192) or a dict with ``embed_dims``, ``num_layers``,
            ``num_heads``, ``feedforward_channels``.
        img_size: the input size the model is built for (for transfer: the
            fine-tuning size): sizes the APE table and the global blocks'
            relative position tables (ViTDet-B at 1024: 64 x 64 grid, 127
            rows). Other input sizes work (tables resized per forward).
        patch_size: patch size. An input whose size is not a multiple is
            padded at its bottom and right (``PatchEmbed``'s
            ``padding='corner'``, as mmpretrain); the padded patches are
            grid positions like any other.
        in_channels: image channels.
        out_indices: block index or sequence of them whose output is
            returned (negative from the end).
        out_type: ``'cls_token'`` (B, C), ``'featmap'`` (B, C, H/p, W/p),
            ``'avg_featmap'`` (B, C) or ``'raw'`` (B, 1 + R + N, C), ``R``
            register tokens.
        with_cls_token: prepend a class token (never rotated by RoPE).
        final_norm: LayerNorm ``ln1`` after the last block.
        rope: the position scheme, ``dict(type=..., **options)`` of
            :data:`mmpos.registry.POSITION_ENCODINGS` (``'mixed'``:
            learnable frequencies, the paper's best; ``'axial'``,
            ``'dinov3'``, ... see :mod:`mmpos.models.layers.positions`),
            with the coordinate frame and augmentation in its ``coords``
            entry; ``None``: no RoPE. Built once for all blocks as
            :attr:`rope`.
        use_ape: add an absolute position embedding (RoPE + APE).
        ape_type: ``'learnable'`` or ``'sincos'`` (fixed Eq. 2 table, stored
            as a frozen ``pos_embed`` parameter like mmpretrain's MAE).
        interpolate_mode: how APE is resized to other grids.
        pretrain_img_size: image size of the checkpoints to load (their APE
            grid, ``None``: a square grid inferred from the table);
            a checkpoint's APE, with or without a class-token slot, is
            resized once, at load, to the ``img_size`` grid.
        num_register_tokens: learnable register ("storage") tokens
            ``register_tokens`` ``(1, R, C)`` placed after the class token;
            never rotated, no APE, left out of ``featmap`` /
            ``avg_featmap`` outputs (``raw`` keeps every token).
        window_size: ViTDet window attention: ``0`` (default) attends
            globally in every block; ``ws > 0`` attends inside ``ws x ws``
            windows of the patch grid (padded to a multiple of ``ws``,
            cropped after each block) in all blocks but
            ``global_attn_indexes``. RoPE rotates with the absolute grid
            coordinates, so a query-key logit inside a window equals the
            global model's. Needs ``with_cls_token=False`` (ViTDet drops the
            class token; an APE table with a class slot still loads) and a
            full grid (``forward`` / ``forward_tokens`` with ``hw``). Adds
            no parameters: every checkpoint of the global model loads.
        global_attn_indexes: blocks that attend globally when
            ``window_size > 0`` (e.g. ``(2, 5, 8, 11)`` for 12 blocks).
        use_rel_pos: ViTDet's decomposed relative position bias in every
            block (``attn.rel_pos_h`` / ``attn.rel_pos_w``, zero init): tables
            of ``2 ws - 1`` offsets in windowed blocks and of the
            ``img_size`` patch grid's in global ones (``2 * 64 - 1 = 127``
            for ViTDet-B at 1024), linearly interpolated
            to other grids. For APE variants (ViTDet's own ViT-B uses it);
            needs ``with_cls_token=False`` and no register tokens.
        with_cp: activation checkpointing per block during training (saves
            memory, recomputes each block's forward in the backward pass).
        drop_rate, drop_path_rate, qkv_bias, norm_cfg, layer_scale_init_value,
        frozen_stages, pre_norm, patch_cfg, layer_cfgs, init_cfg: as in
            mmpretrain's ``VisionTransformer``. The default ``init_cfg`` is
            DeiT's: truncated normal (std 0.02) for linear layers. A
            ``dict(type='Pretrained', checkpoint=PATH, prefix='backbone.')``
            entry (alone or in a list) loads a checkpoint over the random
            init with
            :func:`~mmpos.models.utils.pretrained.load_backbone_pretrained`
            (``checkpoint=None``: random init, logged as a warning; a
            position scheme other than this backbone's: one warning, or
            refused with ``strict=True``).
    """
    arch_zoo = {
        **dict.fromkeys(['t', 'tiny'], {
            'embed_dims': 192, 'num_layers': 12, 'num_heads': 3,
            'feedforward_channels': 768}),
        **dict.fromkeys(['s', 'small'], {
            'embed_dims': 384, 'num_layers': 12, 'num_heads': 6,
            'feedforward_channels': 1536}),
        **dict.fromkeys(['b', 'base'], {
            'embed_dims': 768, 'num_layers': 12, 'num_heads': 12,
            'feedforward_channels': 3072}),
        **dict.fromkeys(['l', 'large'], {
            'embed_dims': 1024, 'num_layers': 24, 'num_heads': 16,
            'feedforward_channels': 4096}),
        # DINOv3's ViT-7B (facebookresearch/dinov3 vit_7b): its SwiGLU's
        # hidden width (layer_cfgs=dict(ffn_cfg=dict(type='SwiGLUFFN')))
        '7b': {
            'embed_dims': 4096, 'num_layers': 40, 'num_heads': 32,
            'feedforward_channels': 8192},
    }  # yapf: disable
    num_extra_tokens = 1
    OUT_TYPES = {'raw', 'cls_token', 'featmap', 'avg_featmap'}
    APE_TYPES = {'learnable', 'sincos'}
    # the random init of linear and norm layers when ``init_cfg`` gives none
    default_init_cfg = DEIT_INIT_CFG

    def __init__(self,
                 arch='base',
                 img_size=224,
                 patch_size=16,
                 in_channels=3,
                 out_indices=-1,
                 drop_rate=0.,
                 drop_path_rate=0.,
                 qkv_bias=True,
                 norm_cfg=dict(type='LN', eps=1e-6),
                 final_norm=True,
                 out_type='cls_token',
                 with_cls_token=True,
                 frozen_stages=-1,
                 rope=DEFAULT_ROPE,
                 use_ape=False,
                 ape_type='learnable',
                 interpolate_mode='bicubic',
                 pretrain_img_size=None,
                 num_register_tokens=0,
                 window_size=0,
                 global_attn_indexes=(),
                 use_rel_pos=False,
                 with_cp=False,
                 layer_scale_init_value=0.,
                 pre_norm=False,
                 patch_cfg=dict(),
                 layer_cfgs=dict(),
                 init_cfg=DEIT_INIT_CFG):
        # a `Pretrained` entry is loaded by init_weights, after the random
        # init, with mmpos' checks (see mmpos.models.utils.pretrained)
        init_cfg, pretrained_cfg = split_pretrained_cfg(
            init_cfg, self.default_init_cfg)
        super().__init__(init_cfg)
        self.pretrained_cfg = pretrained_cfg
        self.arch_settings = self._arch_settings(arch)
        self.embed_dims = self.arch_settings['embed_dims']
        self.num_layers = self.arch_settings['num_layers']
        num_heads = self.arch_settings['num_heads']
        self.img_size, self.patch_size = to_2tuple(img_size), to_2tuple(
            patch_size)
        self.pretrain_img_size = (None if pretrain_img_size is None else
                                  to_2tuple(pretrain_img_size))
        self.out_type, self.out_indices = out_type, self._block_indices(
            out_indices, 'out_indices')
        self.with_cls_token = with_cls_token
        self.num_extra_tokens = int(with_cls_token)
        self.num_register_tokens = num_register_tokens
        self.use_ape, self.ape_type = use_ape, ape_type
        self.interpolate_mode = interpolate_mode
        self.window_size = window_size
        self.global_attn_indexes = self._block_indices(global_attn_indexes,
                                                       'global_attn_indexes')
        self.with_cp, self.final_norm = with_cp, final_norm
        self.frozen_stages = frozen_stages
        self._check_options(use_rel_pos)

        # the parts (this order fixes the state dict and the seeded init)
        self.patch_embed = PatchEmbed(**{
            **dict(in_channels=in_channels, input_size=img_size,
                   embed_dims=self.embed_dims, conv_type='Conv2d',
                   kernel_size=patch_size, stride=patch_size,
                   bias=not pre_norm),
            **patch_cfg})  # yapf: disable
        self.patch_resolution = self.patch_embed.init_out_size
        self.cls_token = nn.Parameter(torch.zeros(
            1, 1, self.embed_dims)) if with_cls_token else None
        self.register_tokens = nn.Parameter(torch.zeros(
            1, num_register_tokens,
            self.embed_dims)) if num_register_tokens else None
        self.pos_embed = self._build_pos_embed() if use_ape else None
        if use_ape:
            self._register_load_state_dict_pre_hook(self._prepare_pos_embed)
        self.drop_after_pos = nn.Dropout(p=drop_rate)
        self.layers = self._build_layers(
            layer_cfgs, drop_path_rate, use_rel_pos, num_heads=num_heads,
            feedforward_channels=self.arch_settings['feedforward_channels'],
            layer_scale_init_value=layer_scale_init_value,
            drop_rate=drop_rate, qkv_bias=qkv_bias, norm_cfg=norm_cfg)
        self.rope = build_position_scheme(rope, self.embed_dims // num_heads,
                                          num_heads, self.num_layers)
        # opt-in: eval forwards on one grid reuse its tables
        self.table_cache = CachedTables()
        self.pre_norm = (build_norm_layer(norm_cfg, self.embed_dims)
                         if pre_norm else nn.Identity())
        if final_norm:
            self.ln1 = build_norm_layer(norm_cfg, self.embed_dims)
        if out_type == 'avg_featmap':
            self.ln2 = build_norm_layer(norm_cfg, self.embed_dims)
        if frozen_stages > 0:
            self._freeze_stages()

    def _block_indices(self, indices: Union[int, Sequence[int]],
                       name: str) -> List[int]:
        """``indices`` (an int or a sequence, as mmpretrain's
        ``out_indices``; negative from the end) as block indices."""
        if isinstance(indices, int):
            indices = [indices]
        if not isinstance(indices, Sequence) or isinstance(indices, str):
            raise TypeError(f'{name} must be an int or a sequence of ints, '
                            f'got {type(indices).__name__} {indices!r}')
        blocks = [i + self.num_layers if i < 0 else i for i in indices]
        if any(not 0 <= i < self.num_layers for i in blocks):
            raise ValueError(f'Invalid {name} {indices} for '
                             f'{self.num_layers} layers')
        return blocks

    def _check_options(self, use_rel_pos: bool):
        """Refuse the values and combinations the model cannot run."""
        if self.out_type not in self.OUT_TYPES:
            raise ValueError(f'Unsupported out_type {self.out_type!r}, choose '
                             f'from {sorted(self.OUT_TYPES)}')
        if self.use_ape and self.ape_type not in self.APE_TYPES:
            raise ValueError(f'Unsupported ape_type {self.ape_type!r}, '
                             f'choose from {sorted(self.APE_TYPES)}')
        if self.out_type == 'cls_token' and not self.with_cls_token:
            raise ValueError('out_type="cls_token" needs with_cls_token=True')
        if self.window_size < 0:
            raise ValueError(f'window_size must be >= 0 (0: global '
                             f'attention), got {self.window_size}')
        prefix = self.with_cls_token or self.num_register_tokens
        if self.window_size and prefix:
            raise ValueError('window_size > 0 needs with_cls_token=False and '
                             'num_register_tokens=0 (window attention has '
                             'no class or register tokens)')
        if use_rel_pos and prefix:
            raise ValueError('use_rel_pos=True needs with_cls_token=False and '
                             'num_register_tokens=0 (the bias is defined on '
                             'the patch grid only)')

    def _build_layers(self, layer_cfgs, drop_path_rate: float,
                      use_rel_pos: bool, **common) -> ModuleList:
        """The blocks: ``common`` arguments, drop-path rising linearly to
        ``drop_path_rate``, each block's window and relative-position grid;
        ``layer_cfgs`` (one dict for all or one per block) over them."""
        dpr = np.linspace(0, drop_path_rate, self.num_layers)
        if isinstance(layer_cfgs, dict):
            layer_cfgs = [layer_cfgs] * self.num_layers
        return ModuleList(
            RoPETransformerEncoderLayer(**{
                **dict(common, embed_dims=self.embed_dims,
                       drop_path_rate=float(dpr[i]),
                       window_size=self._block_window(i),
                       rel_pos_size=self._rel_pos_size(i)
                       if use_rel_pos else None),
                **layer_cfgs[i]}) for i in range(self.num_layers))

    def _prepare_pos_embed(self, state_dict, prefix, *args, **kwargs):
        """Load hook: a checkpoint's ``pos_embed`` of any grid, with or
        without a class-token slot, becomes this model's table: the slot is
        dropped or (zeros) added and the grid resized once, here, to the
        ``img_size`` grid (``interpolate_mode``). The checkpoint's grid is
        ``pretrain_img_size``'s, else its own if square."""
        name = prefix + 'pos_embed'
        if name not in state_dict:
            return
        table = state_dict[name]
        extra = self.num_extra_tokens
        tokens = table.shape[1]
        own = tuple(self.patch_resolution)
        if table.shape == self.pos_embed.shape:
            return
        if self.pretrain_img_size is not None:
            src = tuple(s // p for s, p in zip(self.pretrain_img_size,
                                               self.patch_size))
        elif tokens - own[0] * own[1] in (0, 1):
            src = own
        else:
            side = math.isqrt(tokens)
            side = side if side * side == tokens else math.isqrt(tokens - 1)
            src = (side, side)
        slot = tokens - src[0] * src[1]
        if slot not in (0, 1):
            raise ValueError(
                f'{type(self).__name__}: checkpoint {name} has {tokens} '
                f'tokens, not a {src[0]}x{src[1]} grid with or without a '
                'class-token slot; set pretrain_img_size to its image size')
        cls_pos = table[:, :slot] if extra and slot else table.new_zeros(
            1, extra, table.shape[2])
        grid = resize_pos_embed(table[:, slot:], src, self.patch_resolution,
                                self.interpolate_mode, 0)
        state_dict[name] = torch.cat((cls_pos[:, :extra], grid), dim=1)

    def _block_window(self, index: int) -> int:
        """Window side of block ``index`` (``0``: global attention)."""
        return 0 if index in self.global_attn_indexes else self.window_size

    def _rel_pos_size(self, index: int) -> Tuple[int, int]:
        """Grid of block ``index``'s relative position tables: its window,
        or the ``img_size`` patch grid for a global block."""
        ws = self._block_window(index)
        return (ws, ws) if ws else tuple(self.patch_resolution)

    def _arch_settings(self, arch) -> dict:
        if isinstance(arch, str):
            if arch.lower() not in self.arch_zoo:
                raise ValueError(f'Arch {arch!r} is not one of '
                                 f'{sorted(self.arch_zoo)}')
            return self.arch_zoo[arch.lower()]
        keys = {'embed_dims', 'num_layers', 'num_heads',
                'feedforward_channels'}
        if not isinstance(arch, dict) or not keys <= set(arch):
            raise ValueError(f'A custom arch needs a dict with keys {keys}')
        return arch

    def _build_pos_embed(self) -> nn.Parameter:
        """``(1, extra + H0 * W0, C)`` table for the ``img_size`` grid."""
        h, w = self.patch_resolution
        table = torch.zeros(1, self.num_extra_tokens + h * w, self.embed_dims)
        if self.ape_type == 'sincos':
            table[0, self.num_extra_tokens:] = sincos_pos_embed_2d(
                grid_coords(h, w), self.embed_dims)
        return nn.Parameter(table, requires_grad=self.ape_type == 'learnable')

    def init_weights(self):
        """Random init (``init_cfg``, tokens truncated normal), then the
        ``Pretrained`` checkpoint, if any, over it (keys it lacks stay
        random; see
        :func:`mmpos.models.utils.pretrained.load_backbone_pretrained`,
        which raises when nothing matches)."""
        super().init_weights()
        self.init_tokens()
        if self.pretrained_cfg is not None:
            load_backbone_pretrained(self, self.pretrained_cfg,
                                     resizable=('pos_embed', ))

    def init_tokens(self):
        """The random init of the class and register tokens and of a
        learnable APE: truncated normal, std 0.02 (DeiT's)."""
        for token in (self.cls_token, self.register_tokens):
            if token is not None:
                trunc_normal_(token, std=.02)
        if self.use_ape and self.ape_type == 'learnable':
            trunc_normal_(self.pos_embed, std=.02)

    def _freeze_stages(self):
        frozen = [self.patch_embed, self.pre_norm, self.drop_after_pos]
        frozen += list(self.layers[:self.frozen_stages])
        if self.frozen_stages >= self.num_layers:
            frozen += [getattr(self, n) for n in ('ln1', 'ln2')
                       if hasattr(self, n)]
        for param in (self.pos_embed, self.cls_token, self.register_tokens):
            if param is not None:
                param.requires_grad = False
        for name, param in (self.rope.named_parameters()
                            if self.rope is not None else ()):
            index = name.split('.')[-1]  # <param>.<i>: block i's
            if not index.isdigit() or int(index) < self.frozen_stages:
                param.requires_grad = False
        for module in frozen:
            module.eval()
            for param in module.parameters():
                param.requires_grad = False

    def train(self, mode: bool = True):
        super().train(mode)
        if mode and self.frozen_stages > 0:
            self._freeze_stages()
        return self

    def patchify(self, img: Tensor) -> Tuple[Tensor, Tuple[int, int]]:
        """Patch tokens ``(B, h * w, C)`` of ``img`` (B, in_channels, H, W)
        without position embedding, and the grid ``(h, w)``; a size that is
        not a multiple of the patch is padded at the bottom and right
        (``PatchEmbed``'s ``padding='corner'``, as mmpretrain's ViT)."""
        return self.patch_embed(img)

    def embed(self, img: Tensor) -> Tuple[Tensor, Tuple[int, int]]:
        """Patchify ``img`` (B, in_channels, H, W) and add APE (if used).

        Returns the patch tokens ``(B, h * w, C)`` in row-major order (their
        coordinates are ``grid_coords(h, w)``) and the grid ``(h, w)``. The
        APE table is resized to ``(h, w)`` with ``interpolate_mode``.
        """
        x, hw = self.patchify(img)
        pos = self.patch_pos_embed(hw)
        return (x if pos is None else x + pos), hw

    def patch_pos_embed(self, hw: Sequence[int]) -> Optional[Tensor]:
        """The APE of the patches of an ``hw`` grid, ``(1, h * w, C)``
        (the table resized with ``interpolate_mode`` when ``hw`` is not
        the ``img_size`` grid), or ``None`` without APE."""
        if self.pos_embed is None:
            return None
        pos = resize_pos_embed(self.pos_embed, self.patch_resolution, hw,
                               self.interpolate_mode, self.num_extra_tokens)
        return pos[:, self.num_extra_tokens:]

    def forward_tokens(self,
                       x: Tensor,
                       coords: Optional[Tensor] = None,
                       hw: Optional[Sequence[int]] = None,
                       key_mask: Optional[Tensor] = None) -> tuple:
        """Run the blocks on already-embedded patch tokens.

        Args:
            x: ``(B, M, C)`` patch tokens without class token, APE (if any)
                already added, e.g. a subset of :meth:`embed`'s output.
            coords: ``(M, 2)`` or ``(B, M, 2)`` float ``(x, y)`` positions of
                the tokens in patch units (fractional allowed; ``NaN``: no
                position). ``None``: the tokens are the full ``hw`` grid.
            hw: the patch grid; required without ``coords`` and for
                ``out_type='featmap'`` (then ``M`` must equal ``h * w``).
            key_mask: ``(B, M)`` bool, ``False`` for padding tokens (NaFlex
                batches, :meth:`forward_naflex`): no token attends to them
                and ``'avg_featmap'`` leaves them out of its mean. Needs
                global attention, no relative position bias and an
                ``out_type`` other than ``'featmap'``.

        The class token and the register tokens are prepended here and get
        no rotation. ``coords`` are mapped into the RoPE coordinate frame
        and, in training, augmented by :attr:`rope` (tables in fp32, fp64
        for fp64 tokens). Returns a tuple with one output per
        ``out_indices``, formatted by ``out_type``.
        """
        if coords is None and hw is None:
            raise ValueError('forward_tokens needs `coords` or `hw`')
        if key_mask is not None:
            self._check_key_mask(x, key_mask)
        if self.out_type == 'featmap' and (
                hw is None or x.shape[1] != hw[0] * hw[1]):
            raise ValueError(f'out_type="featmap" needs hw matching the '
                             f'{x.shape[1]} tokens, got hw={hw}')
        if self.cls_token is not None:
            cls_token = self.cls_token.expand(x.shape[0], -1, -1)
            if self.pos_embed is not None:
                cls_token = cls_token + self.pos_embed[:, :1]
            x = torch.cat((cls_token, x), dim=1)
        if self.register_tokens is not None:
            registers = self.register_tokens.expand(x.shape[0], -1, -1)
            x = torch.cat((x[:, :self.num_extra_tokens], registers,
                           x[:, self.num_extra_tokens:]), dim=1)
        x = self.pre_norm(self.drop_after_pos(x))
        tables = self.position_tables(
            coords, hw, x.shape[0], x.device,
            torch.promote_types(x.dtype, torch.float32))
        if key_mask is not None:  # prefix tokens are always keys
            key_mask = F.pad(key_mask.bool(), (x.shape[1] - key_mask.shape[1],
                                               0), value=True)

        outs = []
        for i, layer in enumerate(self.layers):
            if self.with_cp and self.training and x.requires_grad:
                x = cp.checkpoint(layer, x, tables[i], hw, key_mask,
                                  use_reentrant=False)
            else:
                x = layer(x, rope=tables[i], hw=hw, key_mask=key_mask)
            if i == self.num_layers - 1 and self.final_norm:
                x = self.ln1(x)
            if i in self.out_indices:
                outs.append(self._format_output(x, hw, key_mask))
        return tuple(outs)

    def _check_key_mask(self, x: Tensor, key_mask: Tensor) -> None:
        """Refuse, in one line, what a padded (NaFlex) sequence cannot
        run: windows and the relative position bias need one grid, and so
        does ``out_type='featmap'``."""
        if key_mask.shape != x.shape[:2]:
            raise ValueError(f'key_mask must have shape {tuple(x.shape[:2])}'
                             f' (B, patch tokens), got {tuple(key_mask.shape)}')
        if self.window_size or self.layers[0].attn.use_rel_pos:
            raise ValueError(
                'NaFlex (padded) batches need global attention without the '
                'relative position bias, got window_size='
                f'{self.window_size}, use_rel_pos='
                f'{self.layers[0].attn.use_rel_pos}')
        if self.out_type == 'featmap':
            raise ValueError('out_type="featmap" needs one grid; a NaFlex '
                             "batch gives 'raw', 'cls_token' or 'avg_featmap' "
                             '(naflex_featmaps splits raw tokens per image)')

    def position_tables(self, coords: Optional[Tensor],
                        hw: Optional[Sequence[int]], batch_size: int,
                        device=None, dtype: torch.dtype = torch.float32
                        ) -> List[Optional[PositionTable]]:
        """One table per block from :attr:`rope` (``None`` without RoPE):
        ``coords`` ``(M, 2)`` / ``(B, M, 2)`` or ``None`` for the ``hw``
        grid; windowed blocks get their windows' tables
        (:meth:`~mmpos_positions.PositionScheme.forward`). Eval-mode tables
        of a grid come from :attr:`table_cache`
        (:class:`~mmpos_positions.CachedTables`)."""
        if self.rope is None:
            return [None] * self.num_layers
        windows = [layer.window_size for layer in self.layers]
        return self.table_cache(self.rope, coords, hw, batch_size, windows,
                                device=device, dtype=dtype)

    def freeze_positions(self, hw: Optional[Sequence[int]],
                         device=None) -> None:
        """Wrap :attr:`rope` in :class:`~mmpos_positions.FrozenTables`: the
        eval-mode tables of the ``hw`` grid, computed once on the real cos /
        sin path, in every later forward (export: the traced graph holds
        them as constants); ``hw=None`` unwraps it."""
        if isinstance(self.rope, FrozenTables):
            self.rope = self.rope.scheme
        if self.rope is not None and hw is not None:
            self.rope = FrozenTables(
                self.rope, hw, [layer.window_size for layer in self.layers],
                device)

    def forward(self, x: Union[Tensor, dict]) -> tuple:
        """``x``: images ``(B, in_channels, H, W)`` (padded to a multiple of
        the patch), or a NaFlex batch, the dict of :meth:`forward_naflex`'s
        arguments (:func:`~mmpos.datasets.naflex_collate`). Returns a tuple
        with one output per ``out_indices``."""
        if isinstance(x, dict):
            return self.forward_naflex(**x)
        tokens, hw = self.embed(x)
        return self.forward_tokens(tokens, hw=hw)

    def forward_naflex(self, patches: Tensor, patch_coord: Tensor,
                       patch_valid: Tensor,
                       grids: Optional[Tensor] = None) -> tuple:
        """The blocks on a NaFlex batch: images of their own sizes, each a
        row-major sequence of its patches, padded to the longest
        (:func:`~mmpos.datasets.naflex_collate`, timm's NaFlex layout).

        Args:
            patches: ``(B, N, p * p * in_channels)`` pixels, each patch in
                ``(row, column, channel)`` order (timm's ``channels_last``).
            patch_coord: ``(B, N, 2)`` integer ``(y, x)`` of every patch in
                its image's grid; a sample's grid ``(h, w)`` is its largest
                valid coordinate + 1.
            patch_valid: ``(B, N)`` bool, ``False`` for padding.
            grids: ``(B, 2)`` each image's grid ``(h, w)``; default
                :func:`naflex_grids` (give it when the patches are a subset
                of the grid, e.g. MAE's kept patches).

        Every image gets what :meth:`forward` gives it alone (within float
        rounding): the patch projection as a matrix product, APE resized to
        its own grid, its own coordinates (padding: ``NaN``, no position)
        in a coordinate frame of its own grid, padding out of every
        attention (``key_mask`` of :meth:`forward_tokens`) and of
        ``'avg_featmap'``'s mean. Global blocks only (windows need one
        grid).
        """
        valid = patch_valid.bool()
        if grids is None:
            grids = naflex_grids(patch_coord, valid)
        x = self.embed_patches(patches)
        x = x + self.naflex_pos_embed(patch_coord, valid, grids, x.dtype)
        return self.forward_naflex_tokens(x, patch_coord, valid, grids)

    def forward_naflex_tokens(self, x: Tensor, patch_coord: Tensor,
                              patch_valid: Tensor, grids: Tensor,
                              unplaced: Optional[Tensor] = None) -> tuple:
        """The blocks on already-embedded NaFlex tokens ``x`` ``(B, N, C)``
        (:meth:`embed_patches`, APE of :meth:`naflex_pos_embed` added, or
        not), the rest of :meth:`forward_naflex`'s arguments as there
        (``grids`` given). ``unplaced``: optional ``(B, N)`` bool, ``True``
        for tokens with no position (``NaN`` coordinates: no rotation, as
        :meth:`forward_kept`'s; DropPos' dropped positions)."""
        valid = patch_valid.bool()
        hw = tuple(int(v) for v in grids.amax(0))  # the batch's bounding grid
        no_position = ~valid if unplaced is None else ~valid | unplaced
        coords = patch_coord.flip(-1).to(torch.promote_types(
            x.dtype, torch.float32)).masked_fill(no_position[..., None],
                                                 float('nan'))
        if self.rope is not None:
            coords = self._naflex_frame(coords, grids, hw)
        return self.forward_tokens(x, coords=coords, hw=hw, key_mask=valid)

    def embed_patches(self, patches: Tensor) -> Tensor:
        """``(B, N, p * p * in_channels)`` patches in ``(row, column,
        channel)`` order -> ``(B, N, C)`` tokens: the patch projection's
        convolution as the matrix product it is on one patch (then its norm,
        if any), no position."""
        proj = self.patch_embed.projection
        weight = proj.weight.permute(0, 2, 3, 1).flatten(1)  # (C, p p c)
        if patches.shape[-1] != weight.shape[1]:
            raise ValueError(f'patches of {weight.shape[1]} values (p * p * '
                             f'in_channels) expected, got {patches.shape[-1]}')
        x = F.linear(patches, weight, proj.bias)
        norm = self.patch_embed.norm
        return x if norm is None else norm(x)

    def naflex_pos_embed(self, patch_coord: Tensor, valid: Tensor,
                         grids: Tensor, dtype: torch.dtype) -> Tensor:
        """APE of the patches of a NaFlex batch, ``(B, N, C)`` (zeros
        without APE and for padding): each image's entries of the table
        resized to its own grid (:meth:`patch_pos_embed`, once per
        distinct grid)."""
        B, N = valid.shape
        pos = patch_coord.new_zeros(B, N, self.embed_dims, dtype=dtype)
        if self.pos_embed is None:
            return pos
        for grid in torch.unique(grids, dim=0).tolist():
            rows = (grids == grids.new_tensor(grid)).all(-1).nonzero()[:, 0]
            table = self.patch_pos_embed(grid)[0].to(dtype)  # (h * w, C)
            index = patch_coord[rows, :, 0] * grid[1] + patch_coord[rows, :, 1]
            index = index.clamp(0, table.shape[0] - 1)
            pos[rows] = table[index] * valid[rows, :, None]
        return pos

    def _naflex_frame(self, coords: Tensor, grids: Tensor,
                      hw: Sequence[int]) -> Tensor:
        """Patch-unit ``(x, y)`` coordinates ``(B, N, 2)`` mapped so that
        the scheme's frame on the batch grid ``hw`` (one per forward) puts
        every image where the frame of its own grid puts it: the affine
        ``c -> ((2c + 1) d / d_i - 1) / 2`` per axis, ``d`` the frame's
        divisor of ``hw`` and ``d_i`` that of the image's grid (see
        :func:`~mmpos_positions.frame_coords`). The ``'patch'`` frame is
        unchanged. Eval-mode frequency scaling reads one grid: refused for
        batches of several."""
        frame = self.rope.coords.frame
        if getattr(self.rope, 'freq_scaling', None) is not None and \
                not self.rope.training and len(torch.unique(grids, dim=0)) > 1:
            raise ValueError('frequency scaling (freq_scaling) scales by one '
                             'grid; give NaFlex batches of one grid size in '
                             'eval mode, or no freq_scaling')
        if frame == 'patch':
            return coords
        g = grids.flip(-1).to(coords)  # (B, 2) as (w, h)
        full = coords.new_tensor(hw[::-1])
        if frame == 'separate':
            ratio = full / g
        else:
            reduce = torch.amax if frame == 'max' else torch.amin
            ratio = (reduce(full, 0) / reduce(g, -1))[:, None].expand_as(g)
        return ((2 * coords + 1) * ratio[:, None] - 1) / 2

    def check_kept_forward(self, owner: str) -> None:
        """Raise unless :meth:`forward_kept` works for ``owner``: it needs
        the class token, ``out_type='raw'`` and the last block as the only
        output."""
        if self.cls_token is None or self.out_type != 'raw' or \
                self.out_indices != [self.num_layers - 1]:
            raise ValueError(
                f'{owner} needs {type(self).__name__}(with_cls_token=True, '
                f'out_type="raw", out_indices=-1) (it reads the class token '
                f'and the kept patches of the last block), got '
                f'with_cls_token={self.with_cls_token}, out_type='
                f'{self.out_type!r}, out_indices={self.out_indices}')

    def forward_kept(self, x: Tensor, ids_keep: Tensor, hw: Sequence[int],
                     unplaced: Optional[Tensor] = None) -> Tensor:
        """The blocks on the kept patches of a masked grid (MAE, DropPos).

        Every kept patch is rotated at its **own grid coordinates**, never at
        its index in the shortened sequence. Needs the options of
        :meth:`check_kept_forward`.

        Args:
            x: ``(B, K, C)`` kept patch tokens, APE (if any) already added,
                in the order of ``ids_keep``.
            ids_keep: ``(B, K)`` long, their row-major indices in the ``hw``
                grid (e.g. ``random_masking(...).ids_keep``).
            hw: the patch grid ``(h, w)``.
            unplaced: optional ``(B, K)`` bool, ``True`` for patches with no
                position (``NaN`` coordinates: no rotation, as the class
                token).

        Returns:
            ``(B, 1 + K, C)``: the class token then the kept patches after
            the last block, register tokens left out.
        """
        coords = gather_tokens(grid_coords(*hw, device=x.device)[None],
                               ids_keep)
        if unplaced is not None:
            coords = coords.masked_fill(unplaced[..., None], float('nan'))
        return self.without_registers(
            self.forward_tokens(x, coords=coords, hw=hw)[-1])

    def without_registers(self, x: Tensor) -> Tensor:
        """``raw`` tokens ``(B, P + R + M, C)`` without the ``R`` register
        tokens: ``(B, P + M, C)`` (``P`` = 1 with a class token); ``x``
        itself when there are none. For methods that read the class token
        at 0 and the patches after it."""
        if not self.num_register_tokens:
            return x
        return torch.cat((x[:, :self.num_extra_tokens],
                          x[:, self.num_extra_tokens +
                            self.num_register_tokens:]), dim=1)

    def _format_output(self, x: Tensor, hw,
                       key_mask: Optional[Tensor] = None) -> Tensor:
        if self.out_type == 'raw':
            return x
        if self.out_type == 'cls_token':
            return x[:, 0]
        prefix = self.num_extra_tokens + self.num_register_tokens
        patch_tokens = x[:, prefix:]
        if self.out_type == 'featmap':
            return patch_tokens.reshape(x.shape[0], *hw,
                                        -1).permute(0, 3, 1, 2)
        if key_mask is None:
            return self.ln2(patch_tokens.mean(dim=1))
        # the mean over each image's own patches, padding left out
        valid = key_mask[:, prefix:, None].to(patch_tokens.dtype)
        return self.ln2((patch_tokens * valid).sum(1) / valid.sum(1))

    def get_layer_depth(self, param_name: str, prefix: str = ''):
        """Layer depth for layer-wise lr decay, as mmpretrain's ViT.

        Stem (``patch_embed``, ``cls_token``, ``register_tokens``,
        ``pos_embed``) is depth 0,
        ``layers.<i>.*`` and block ``i``'s position parameters
        ``rope.<name>.<i>`` (RoPE-Mixed's ``rope.freqs.<i>``) are ``i + 1``,
        position parameters shared by all blocks (``rope.<name>``) 0,
        everything else ``num_layers + 1``. Returns ``(depth, num_layers +
        2)``.
        """
        num_layers = self.num_layers + 2
        if not param_name.startswith(prefix):
            return num_layers - 1, num_layers
        name = param_name[len(prefix):]
        if name in ('cls_token', 'register_tokens', 'pos_embed') or \
                name.startswith('patch_embed'):
            return 0, num_layers
        if name.startswith('layers.'):
            return int(name.split('.')[1]) + 1, num_layers
        if name.startswith('rope.'):  # rope.<param>.<i>: block i's
            index = name.split('.')[-1]
            return (int(index) + 1 if index.isdigit() else 0), num_layers
        return num_layers - 1, num_layers
