"""Key layout shared by the ViT converters (the authors' DeiT-III layout,
timm, DINOv3) and the model config of a converted state dict.

Our ``pos_embed`` always has mmpretrain's class-token slot; a source without
one gets a zero slot, which is what the source computes (nothing is added to
its class token). Keys a mapping does not know keep their name, so the key
report (:func:`mmpos.checkpoint.compare`) lists them as unexpected instead of
losing them silently.
"""
import copy
import math
import re
from collections import OrderedDict
from typing import Optional

import torch
from torch import Tensor

from mmpos.errors import ConversionError
from mmpos.checkpoint import strip_prefix
from mmpos.checkpoint.read import StateDict

# Per-block renames shared by the authors' (DeiT-III) and timm's layouts.
_BLOCK_RENAMES = {
    'norm1': 'ln1',
    'attn.qkv': 'attn.qkv',
    'attn.proj': 'attn.proj',
    'norm2': 'ln2',
    'mlp.fc1': 'ffn.layers.0.0',
    'mlp.fc2': 'ffn.layers.1',
    'mlp.w3': 'ffn.w3',  # DINOv3's SwiGLU (w1 and w2: convert_dinov3_official)
    'gamma_1': 'attn.gamma1.weight',  # DeiT-III layer scale
    'gamma_2': 'ffn.gamma2.weight',
    'ls1.gamma': 'attn.gamma1.weight',  # timm layer scale
    'ls2.gamma': 'ffn.gamma2.weight',
}
_TOP_RENAMES = {
    'patch_embed.proj': 'patch_embed.projection',
    'reg_token': 'register_tokens',  # timm (DINOv2 / DINOv3 registers)
    'norm_pre': 'pre_norm',
    'norm': 'ln1',
    'fc_norm': 'ln2',
    'head': 'head.layers.head',
}
_BLOCK_KEY = re.compile(r'^blocks\.(\d+)\.(.+)$')

# RoPEVisionTransformer options of a DINOv3 ViT (facebookresearch/dinov3
# and timm's port): axial RoPE with periods base ** (t / (D/4)), first D/4
# pairs on the row coordinate, rotate-half channel layout, patch centres
# normalised per axis, LayerNorm eps 1e-5 (their 'layernormbf16').
DINOV3_BACKBONE = dict(
    rope=dict(type='axial', periods=dict(base=100.), axes='yx',
              layout='half', coords=dict(frame='separate')),
    norm_cfg=dict(type='LN', eps=1e-5))



def rename_key(key: str) -> str:
    """Map one authors'/timm key to ours (unknown keys are kept)."""
    match = _BLOCK_KEY.match(key)
    if match:
        index, rest = match.groups()
        for old, new in _BLOCK_RENAMES.items():
            if rest == old or rest.startswith(old + '.'):
                return f'layers.{index}.{new}{rest[len(old):]}'
        return key
    for old, new in _TOP_RENAMES.items():
        if key == old or key.startswith(old + '.'):
            return new + key[len(old):]
    return key


def merge_qv_bias(state_dict: StateDict) -> StateDict:
    """``*.attn.q_bias`` / ``*.attn.v_bias`` (timm's EVA attention, no key
    bias) -> one ``*.attn.qkv.bias`` ``[q, 0, v]``."""
    out = OrderedDict()
    for key, value in state_dict.items():
        if key.endswith('.attn.v_bias'):
            continue
        if key.endswith('.attn.q_bias'):
            base = key[:-len('q_bias')]
            v_bias = state_dict.get(base + 'v_bias')
            if v_bias is None:
                raise ConversionError(f'{key} without {base}v_bias')
            out[base + 'qkv.bias'] = torch.cat(
                (value, torch.zeros_like(value), v_bias))
            continue
        out[key] = value
    return out


def with_cls_slot(pos_embed: Tensor, has_slot: bool) -> Tensor:
    """``(1, 1 + N, C)`` APE table; a zero class-token slot is prepended
    when the source has none."""
    if pos_embed.dim() != 3 or pos_embed.shape[0] != 1:
        raise ConversionError('pos_embed must have shape (1, tokens, C), got '
                              f'{tuple(pos_embed.shape)}')
    if has_slot:
        return pos_embed
    return torch.cat((pos_embed.new_zeros(1, 1, pos_embed.shape[-1]),
                      pos_embed), dim=1)


def pos_embed_has_cls_slot(pos_embed: Tensor) -> bool:
    """Whether a square-grid table ``(1, T, C)`` holds ``T = 1 + h^2``
    (class-token slot) or ``T = h^2`` tokens; raises if neither."""
    tokens = pos_embed.shape[1]
    if math.isqrt(tokens)**2 == tokens:
        return False
    if math.isqrt(tokens - 1)**2 == tokens - 1:
        return True
    raise ConversionError(
        f'pos_embed has {tokens} tokens, neither a square grid nor a square '
        'grid plus a class token')


def split_mixed_freqs(freqs: Tensor, num_heads: Optional[int]) -> StateDict:
    """RoPE-Mixed frequencies of all layers -> per-layer ``(2, heads, D/2)``
    under ``rope.freqs.<i>`` (the backbone's position module).

    Accepts the authors' ``(2, depth, heads * D/2)`` (``num_heads`` splits
    the last axis) and timm's ``(2, depth, heads, D/2)``.
    """
    if freqs.dim() == 4 and freqs.shape[0] == 2:
        return {f'rope.freqs.{i}': freqs[:, i].clone()
                for i in range(freqs.shape[1])}
    if freqs.dim() != 3 or freqs.shape[0] != 2 or num_heads is None or \
            freqs.shape[-1] % num_heads:
        raise ConversionError(
            f'freqs must have shape (2, depth, heads * D/2) with heads='
            f'{num_heads} or (2, depth, heads, D/2), got '
            f'{tuple(freqs.shape)}')
    return {
        f'rope.freqs.{i}': freqs[:, i].reshape(2, num_heads, -1).clone()
        for i in range(freqs.shape[1])
    }



def require_vit(state_dict: StateDict, source: str,
                patch_key: str = 'patch_embed.proj.weight') -> None:
    """Refuse a state dict that is not a ViT's (a CNN, another layout)
    before any ViT-specific question (RoPE type, heads) is asked.

    Raises:
        ConversionError: naming ``source``, the keys looked for and the
            top-level modules it has instead.
    """
    if patch_key in state_dict and any(
            _BLOCK_KEY.match(k) for k in state_dict):
        return
    modules = sorted({k.split('.')[0] for k in state_dict})
    raise ConversionError(
        f'{source} is not a ViT checkpoint of this layout: it has no '
        f'{patch_key} and blocks.<i>.* keys (its top-level modules are '
        f'{modules[:8]})')


def resolve_rope_type(requested: str, has_mixed_freqs: bool,
                      source: str) -> str:
    """The RoPE type of a converted checkpoint, never a silent guess.

    RoPE-Mixed stores its learnable frequencies (``freqs`` / ``rope.freqs``);
    RoPE-Axial stores nothing (its frequencies are fixed), so an Axial
    checkpoint has the keys of a plain APE ViT (DeiT-III, timm ViT) and
    cannot be told from one. ``requested='auto'`` therefore returns
    ``'mixed'`` when the frequencies are there and raises otherwise; an
    explicit type other than mixed on a checkpoint with frequencies raises
    too. An explicit ``'mixed'`` without frequencies adds RoPE-Mixed to an
    APE model (the frequencies are then reported missing, freshly
    initialised).
    """
    if has_mixed_freqs:
        if requested not in ('auto', 'mixed'):
            raise ConversionError(
                f'{source} holds RoPE-Mixed frequencies, which '
                f'--rope-type {requested} has no place for; use '
                '--rope-type mixed (or auto)')
        return 'mixed'
    if requested == 'auto':
        raise ConversionError(
            f'{source} has no RoPE frequencies: RoPE-Axial checkpoints store '
            'none, so one cannot be told from a plain APE ViT; refusing to '
            'guess, pass --rope-type axial or none (timm2mmpos: or dinov3)')
    return requested



def classifier_key(key: str) -> str:
    """``backbone.<key>``, except the classification head's ``head.*``."""
    return key if key.startswith('head.') else 'backbone.' + key



def infer_vit_config(state_dict: StateDict,
                     num_heads: Optional[int] = None,
                     rope_type: str = 'mixed',
                     rope_options: Optional[dict] = None,
                     **backbone_options) -> dict:
    """mmpretrain ``ImageClassifier`` config of a converted state dict.

    Architecture sizes come from the tensor shapes; ``num_heads`` is not
    stored in the weights and defaults to ``embed_dims // 64`` (every
    ViT-S/B/L). ``use_ape``, layer scale, qkv bias, final norm, register
    tokens, a SwiGLU feed-forward layer (``ffn.w12``) and the head follow
    from which keys exist. Keys are those of
    :func:`convert_official_rope_vit` / :func:`convert_timm_vit` /
    :func:`convert_dinov3_official`. ``rope_type`` (``'none'``,
    ``'axial'``, ``'mixed'`` or ``'dinov3'``: :data:`DINOV3_BACKBONE`)
    gives the backbone's ``rope``; ``rope_options`` update it (e.g. the
    ``periods`` read from a checkpoint) and ``backbone_options`` override
    any other backbone argument.
    """
    backbone = strip_prefix(state_dict, 'backbone.')
    try:
        proj = backbone['patch_embed.projection.weight']
    except KeyError:
        raise ConversionError('no patch embedding '
                              '(patch_embed.projection.weight) in the '
                              'converted state dict') from None
    embed_dims, patch_size = proj.shape[0], proj.shape[-1]
    depth = 1 + max(
        (int(k.split('.')[1]) for k in backbone if k.startswith('layers.')),
        default=-1)
    if depth == 0:
        raise ConversionError('no transformer blocks in the state dict')
    arch = dict(
        embed_dims=embed_dims,
        num_layers=depth,
        num_heads=num_heads or max(1, embed_dims // 64),
        feedforward_channels=backbone['layers.0.ffn.w12.weight'].shape[0] // 2
        if 'layers.0.ffn.w12.weight' in backbone else
        backbone['layers.0.ffn.layers.0.0.weight'].shape[0])
    if rope_type == 'dinov3':
        family = copy.deepcopy(DINOV3_BACKBONE)
    else:
        family = dict(rope=None if rope_type == 'none' else dict(
            type=rope_type))
    if rope_options:
        family['rope'].update(rope_options)
    cfg = dict(
        type='RoPEVisionTransformer',
        arch=arch,
        patch_size=patch_size,
        **family,
        use_ape='pos_embed' in backbone,
        qkv_bias='layers.0.attn.qkv.bias' in backbone,
        final_norm='ln1.weight' in backbone,
        pre_norm='pre_norm.weight' in backbone,
        layer_scale_init_value=1e-4
        if 'layers.0.attn.gamma1.weight' in backbone else 0.)
    if 'layers.0.ffn.w12.weight' in backbone:  # SwiGLU (DINOv3's 7B)
        cfg['layer_cfgs'] = dict(ffn_cfg=dict(
            type='SwiGLUFFN', bias='layers.0.ffn.w12.bias' in backbone))
    if 'pos_embed' in backbone:
        side = math.isqrt(backbone['pos_embed'].shape[1] - 1)
        cfg['img_size'] = side * patch_size
    if 'register_tokens' in backbone:
        cfg['num_register_tokens'] = backbone['register_tokens'].shape[1]
    if 'ln2.weight' in backbone:
        cfg['out_type'] = 'avg_featmap'
    cfg.update(backbone_options)
    model = dict(type='ImageClassifier', backbone=cfg, neck=None)
    if 'head.layers.head.weight' in state_dict:
        model['head'] = dict(
            type='VisionTransformerClsHead',
            num_classes=state_dict['head.layers.head.weight'].shape[0],
            in_channels=embed_dims)
    return model


