"""Convert ViT checkpoints into the layout of :class:`RoPEVisionTransformer`.

Used by the scripts in ``tools/model_converters/``; the mapping functions are
pure (state dict in, state dict out) so they can be tested and reused.

Sources:

* :func:`convert_official_rope_vit` -- the RoPE-ViT authors' code
  (naver-ai/rope-vit, DeiT-III ``models_v2`` layout): ``patch_embed.proj``,
  ``blocks.<i>.{norm1,attn.qkv,attn.proj,norm2,mlp.fc1,mlp.fc2}``,
  layer scale ``blocks.<i>.gamma_{1,2}``, ``norm``, ``cls_token``, an
  optional ``pos_embed`` covering the patch tokens only, ``head`` and, for
  RoPE-Mixed, one ``freqs`` of shape ``(2, depth, heads * D/2)`` (layer
  ``i`` is ``freqs[:, i].reshape(2, heads, D/2)``: row 0 ``theta_x``, row 1
  ``theta_y``, per head the first ``D/4`` pairs then the last ``D/4``, the
  same layout as :class:`~mmpos.models.layers.RoPE2D`). Its ``freqs_t_x`` /
  ``freqs_t_y`` buffers are the integer grid and are dropped.
* :func:`convert_timm_vit` -- timm ``VisionTransformer`` and ``Eva`` (the
  naver RoPE ViTs ``vit_*_patch16_rope{,_mixed}{,_ape}_224``): the same block
  names with ``ls1.gamma`` / ``ls2.gamma`` (``Eva``: ``gamma_1`` /
  ``gamma_2``), ``norm_pre``, ``fc_norm``, a ``pos_embed`` with or without
  the class-token slot and, for RoPE-Mixed, one top-level ``rope.freqs`` of
  shape ``(2, depth, heads, D/2)`` (same per-head layout as ours).
  timm's DINOv3 ViTs (``Eva`` with ``rope_type='dinov3'``) add register
  tokens ``reg_token`` (-> ``register_tokens``) and, in the ``_qkvb``
  variants, ``attn.q_bias`` / ``attn.v_bias`` (-> ``attn.qkv.bias`` with a
  zero key bias); timm's DINOv2 with registers (``reg_token``,
  ``no_embed_class`` APE) needs nothing else.
* :func:`convert_dinov3_official` -- facebookresearch/dinov3
  ``DinoVisionTransformer``: ``storage_tokens`` -> ``register_tokens``,
  ``ls1/ls2.gamma``, ``attn.qkv.bias`` masked by its ``bias_mask`` (zero
  key bias), ``rope_embed.periods`` read into ``rope_periods`` (checked to
  be a geometric sequence), ``mask_token`` dropped.
* :func:`extract_backbone` -- mmpos / mmpretrain training checkpoints: keep
  ``backbone.*``, drop the algorithm (necks, heads, teachers, ...).
* :func:`positional_field_to_ape` -- ICPF checkpoints: the positional field
  ``pos_field.field`` next to the backbone becomes its ``pos_embed`` for a
  chosen patch grid (the backbone's own table is not what ICPF trained).

Our ``pos_embed`` always has mmpretrain's class-token slot; a source without
one gets a zero slot, which is what the source computes (nothing is added to
its class token). Keys a mapping does not know keep their name, so
:func:`check_against_model` reports them as unexpected instead of losing
them silently.
"""
import argparse
import copy
import math
import os
import os.path as osp
import re
import tempfile
from collections import OrderedDict
from typing import (Callable, Dict, List, NamedTuple, Optional, Sequence,
                    Tuple)

import torch
import torch.nn as nn
from torch import Tensor

from .checkpoint_io import load_local_checkpoint
from .errors import BadInputError

StateDict = Dict[str, Tensor]

# Per-block renames shared by the authors' (DeiT-III) and timm's layouts.
_BLOCK_RENAMES = {
    'norm1': 'ln1',
    'attn.qkv': 'attn.qkv',
    'attn.proj': 'attn.proj',
    'norm2': 'ln2',
    'mlp.fc1': 'ffn.layers.0.0',
    'mlp.fc2': 'ffn.layers.1',
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
    rope_type='axial', rope_periods=dict(base=100.), rope_axes='yx',
    rope_layout='half', rope_coords=dict(frame='separate'),
    norm_cfg=dict(type='LN', eps=1e-5))


class KeyReport(NamedTuple):
    """Keys the model expects but the state dict lacks, and the reverse."""
    missing: List[str]
    unexpected: List[str]

    def __str__(self) -> str:
        lines = []
        for name, keys in (('missing', self.missing),
                           ('unexpected', self.unexpected)):
            lines.append(f'{len(keys)} {name} key(s)' +
                         (': ' + ', '.join(keys) if keys else ''))
        return '\n'.join(lines)


class ShapeMismatchError(BadInputError):
    """A checkpoint tensor whose shape differs from the model's."""


class ConversionError(BadInputError):
    """A checkpoint that cannot be converted as asked."""


def check_against_model(state_dict: StateDict,
                        model: nn.Module) -> KeyReport:
    """Compare ``state_dict`` with ``model.state_dict()``.

    Raises:
        ShapeMismatchError: naming every key whose shape differs, with the
            checkpoint's and the model's shapes.

    Returns:
        :class:`KeyReport` with sorted missing and unexpected keys.
    """
    expected = model.state_dict()
    mismatched = [
        f'{key}: checkpoint {tuple(value.shape)} vs model '
        f'{tuple(expected[key].shape)}' for key, value in state_dict.items()
        if key in expected and value.shape != expected[key].shape
    ]
    if mismatched:
        raise ShapeMismatchError('shape mismatch between checkpoint and '
                                 'model:\n  ' + '\n  '.join(mismatched))
    return KeyReport(
        missing=sorted(set(expected) - set(state_dict)),
        unexpected=sorted(set(state_dict) - set(expected)))


def _rename(key: str) -> str:
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


def _merge_qv_bias(state_dict: StateDict) -> StateDict:
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


def _with_cls_slot(pos_embed: Tensor, has_slot: bool) -> Tensor:
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


def _split_mixed_freqs(freqs: Tensor, num_heads: Optional[int]) -> StateDict:
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


def convert_official_rope_vit(state_dict: StateDict,
                              num_heads: int) -> StateDict:
    """Authors' RoPE-ViT / DeiT-III state dict -> mmpretrain classifier
    layout (``backbone.*``, ``head.layers.head.*``).

    Args:
        state_dict: the ``model`` entry of their checkpoint.
        num_heads: heads per block (not stored in the weights); needed to
            split RoPE-Mixed ``freqs``.
    """
    out = OrderedDict()
    for key, value in state_dict.items():
        if key in ('freqs_t_x', 'freqs_t_y'):
            continue  # the integer grid, rebuilt from the input size
        if key == 'freqs':
            for name, freq in _split_mixed_freqs(value, num_heads).items():
                out['backbone.' + name] = freq
            continue
        if key == 'pos_embed':
            value = _with_cls_slot(value, has_slot=False)
        out[_prefixed(_rename(key))] = value
    return out


def convert_timm_vit(state_dict: StateDict) -> StateDict:
    """timm ``VisionTransformer`` / ``Eva`` state dict -> mmpretrain
    classifier layout.

    The class-token slot of ``pos_embed`` is detected from its token count
    (square grid or square grid + 1, see :func:`pos_embed_has_cls_slot`).
    RoPE-Mixed ``rope.freqs`` ``(2, depth, heads, D/2)`` is split per layer.
    """
    out = OrderedDict()
    for key, value in _merge_qv_bias(state_dict).items():
        if key == 'rope.freqs':
            for name, freq in _split_mixed_freqs(value, None).items():
                out['backbone.' + name] = freq
            continue
        if key == 'pos_embed':
            value = _with_cls_slot(value, pos_embed_has_cls_slot(value))
        out[_prefixed(_rename(key))] = value
    return out


def dinov3_periods(periods: Tensor) -> dict:
    """``rope_periods`` of a DINOv3 checkpoint's ``rope_embed.periods``
    ``(D/4,)``: ``dict(base=b)`` when ``periods[t] = b ** (t / (D/4))``,
    else ``dict(min_period=periods[0], max_period=periods[-1])``; either
    checked against every stored period (relative 1e-2: released weights
    store them in bf16). Raises if the periods are not geometric."""
    from mmpos.models.layers.rope import frequency_magnitudes
    periods = periods.double()
    quarter = periods.numel()
    if quarter < 2 or not torch.isfinite(periods).all() or \
            (periods <= 0).any():
        raise ConversionError('rope_embed.periods must hold >= 2 positive '
                              f'periods, got {periods.tolist()}')
    candidates = []
    if abs(periods[0].item() - 1) < 1e-2:
        base = periods[-1].item()**(quarter / (quarter - 1))
        candidates.append(dict(base=float(f'{base:.4g}')))
    candidates.append(dict(min_period=periods[0].item(),
                           max_period=periods[-1].item()))
    for cand in candidates:
        expected = 2 * math.pi / frequency_magnitudes(4 * quarter,
                                                      periods=cand)
        if torch.allclose(expected, periods, rtol=1e-2, atol=0):
            return cand
    raise ConversionError('rope_embed.periods is not a geometric sequence: '
                          f'{periods.tolist()}')


def convert_dinov3_official(state_dict: StateDict) -> Tuple[StateDict, dict]:
    """facebookresearch/dinov3 ``DinoVisionTransformer`` state dict ->
    ``(mmpretrain classifier layout, rope_periods)``.

    ``storage_tokens`` become ``register_tokens``; a masked key bias
    (``attn.qkv.bias_mask``, ``mask_k_bias=True``) is applied to
    ``attn.qkv.bias`` and dropped; ``mask_token`` (pretraining only) is
    dropped; ``rope_embed.periods`` is read by :func:`dinov3_periods`.
    Other keys (``cls_norm``, ``local_cls_norm`` of untied-norm models,
    SwiGLU FFNs) keep their names and are reported unexpected.
    """
    if 'rope_embed.periods' not in state_dict:
        raise ConversionError('no rope_embed.periods: not a DINOv3 '
                              'DinoVisionTransformer checkpoint')
    periods = dinov3_periods(state_dict['rope_embed.periods'])
    out = OrderedDict()
    for key, value in state_dict.items():
        if key in ('mask_token', 'rope_embed.periods') or \
                key.endswith('.bias_mask'):
            continue
        if key == 'storage_tokens':
            out['backbone.register_tokens'] = value
            continue
        if key.endswith('.attn.qkv.bias'):
            mask = state_dict.get(key + '_mask')
            if mask is not None:
                if not torch.isfinite(mask).all():
                    raise ConversionError(f'{key}_mask is not finite (an '
                                          'uninitialised buffer)')
                value = value * mask.to(value.dtype)
        out[_prefixed(_rename(key))] = value
    return out, periods


def _prefixed(key: str) -> str:
    return key if key.startswith('head.') else 'backbone.' + key


def extract_backbone(state_dict: StateDict,
                     src_prefix: str = 'backbone.',
                     keep_prefix: bool = False) -> StateDict:
    """Keep the ``src_prefix`` sub-state-dict of a training checkpoint.

    Args:
        src_prefix: the module to extract, e.g. ``'backbone.'`` or
            ``'teacher.backbone.'``. A DDP ``module.`` prefix is ignored.
        keep_prefix: write keys as ``backbone.<name>`` (for ``load_from`` of
            a whole detector/segmentor/classifier, or ``init_cfg=dict(
            type='Pretrained', prefix='backbone.')``) instead of bare
            ``<name>`` (backbone ``init_cfg`` without prefix).
    """
    state_dict = OrderedDict(
        (k[len('module.'):] if k.startswith('module.') else k, v)
        for k, v in state_dict.items())
    out = OrderedDict((('backbone.' if keep_prefix else '') + k[len(
        src_prefix):], v) for k, v in state_dict.items()
                      if k.startswith(src_prefix))
    if not out:
        modules = sorted({k.split('.')[0] for k in state_dict})
        raise ConversionError(f'no {src_prefix!r} keys in the checkpoint; '
                              f'its top-level modules are {modules}')
    return out


def find_positional_field(state_dict: StateDict,
                          src_prefix: str = 'backbone.') -> Optional[Tensor]:
    """The ICPF positional field of the backbone under ``src_prefix``: the
    sibling ``pos_field.field`` (``'backbone.'`` -> ``'pos_field.field'``,
    ``'teacher.module.backbone.'`` -> ``'teacher.module.pos_field.field'``;
    a DDP ``module.`` prefix is ignored), or ``None`` when there is none."""
    if not src_prefix.endswith('backbone.'):
        return None
    key = src_prefix[:-len('backbone.')] + 'pos_field.field'
    for candidate in (key, 'module.' + key):
        if candidate in state_dict:
            return state_dict[candidate]
    return None


def positional_field_to_ape(backbone: StateDict,
                            field: Tensor,
                            grid: Optional[Sequence[int]] = None
                            ) -> StateDict:
    """Replace a backbone's APE by an ICPF positional field (ICPF §3.2.1).

    While ICPF pretrains, patch positions are crops of the field ``P``; the
    patch slots of the backbone's own ``pos_embed`` are never used. A plain
    APE ViT computes what ICPF computed on whole images when its table is
    the field's whole-image crop on the patch grid, i.e. ``P`` resized to
    ``grid`` (bilinear, ``align_corners=False``; :func:`~mmpos.models.
    selfsup.icpf.positional_field.field_to_pos_embed`). The class-token slot is
    kept.

    Args:
        backbone: bare backbone state dict (keys without ``backbone.``) with
            ``pos_embed`` ``(1, 1 + h0 * w0, d)`` (class-token slot first,
            as every ICPF backbone has).
        field: ``(1, d, h_P, w_P)``.
        grid: ``(h, w)`` patch grid of the new table; default: the square
            grid of the existing ``pos_embed``.

    Returns:
        A copy of ``backbone`` with ``pos_embed`` ``(1, 1 + h * w, d)``.
    """
    from mmpos.models.selfsup.icpf import field_to_pos_embed
    pos = backbone.get('pos_embed')
    if pos is None:
        raise ConversionError('the backbone has no pos_embed to replace by '
                              'the positional field (needs use_ape=True)')
    if field.dim() != 4 or field.shape[:2] != (1, pos.shape[-1]):
        raise ConversionError(
            f'positional field must have shape (1, {pos.shape[-1]}, h, w) '
            f'to match pos_embed {tuple(pos.shape)}, got '
            f'{tuple(field.shape)}')
    if grid is None:
        side = math.isqrt(pos.shape[1] - 1)
        if side * side != pos.shape[1] - 1:
            raise ConversionError(
                f'pos_embed {tuple(pos.shape)} is not a class token plus a '
                'square grid; give the grid (h, w) explicitly')
        grid = (side, side)
    if len(grid) != 2 or min(grid) < 1:
        raise ConversionError(f'grid must be (h, w) >= 1, got {grid}')
    out = OrderedDict(backbone)
    out['pos_embed'] = field_to_pos_embed(
        field.float(), tuple(grid), pos[:, :1].float()).to(pos.dtype)
    return out


def strip_prefix(state_dict: StateDict, prefix: str) -> StateDict:
    """Keys starting with ``prefix``, without it (others are dropped)."""
    return OrderedDict((k[len(prefix):], v) for k, v in state_dict.items()
                       if k.startswith(prefix))


def infer_vit_config(state_dict: StateDict,
                     num_heads: Optional[int] = None,
                     rope_type: str = 'mixed',
                     **backbone_options) -> dict:
    """mmpretrain ``ImageClassifier`` config of a converted state dict.

    Architecture sizes come from the tensor shapes; ``num_heads`` is not
    stored in the weights and defaults to ``embed_dims // 64`` (every
    ViT-S/B/L). ``use_ape``, layer scale, qkv bias, final norm, register
    tokens and the head follow from which keys exist. Keys are those of
    :func:`convert_official_rope_vit` / :func:`convert_timm_vit` /
    :func:`convert_dinov3_official`. ``rope_type='dinov3'`` means
    :data:`DINOV3_BACKBONE`; ``backbone_options`` override any backbone
    argument (e.g. ``rope_periods`` read from a checkpoint).
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
        feedforward_channels=backbone['layers.0.ffn.layers.0.0.weight'].
        shape[0])
    family = dict(DINOV3_BACKBONE) if rope_type == 'dinov3' else dict(
        rope_type=rope_type)
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


# --------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------
def load_weights(path: str) -> dict:
    """Load a checkpoint file with ``torch.load(weights_only=True)``.

    Only tensors and plain containers are unpickled (``argparse.Namespace``
    is allowed too: the DeiT/RoPE-ViT training scripts store their ``args``
    in checkpoints). Anything else is refused with the loader's message.
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f'checkpoint not found: {path}')
    try:
        with torch.serialization.safe_globals([argparse.Namespace]):
            return torch.load(path, map_location='cpu', weights_only=True)
    except Exception as err:  # pickle errors come in many types
        raise ConversionError(
            f'cannot load {path} with torch.load(weights_only=True): '
            f'{err}') from err


def load_training_checkpoint(path: str) -> dict:
    """Load an mmengine training checkpoint: ``weights_only=True`` where the
    file allows, else only if its pickled objects are those mmengine writes
    (message hub), see :func:`mmpos.utils.checkpoint_io.
    load_local_checkpoint`."""
    return load_local_checkpoint(path, map_location='cpu')


def unwrap_state_dict(checkpoint: dict, keys=('state_dict', 'model')):
    """The state dict inside a checkpoint (first of ``keys`` present), or
    the checkpoint itself when it already maps names to tensors."""
    for key in keys:
        if isinstance(checkpoint, dict) and isinstance(
                checkpoint.get(key), dict):
            return checkpoint[key]
    if isinstance(checkpoint, dict) and checkpoint and all(
            isinstance(v, Tensor) for v in checkpoint.values()):
        return checkpoint
    found = sorted(checkpoint) if isinstance(checkpoint, dict) else type(
        checkpoint).__name__
    raise ConversionError(
        f'no state dict found: expected one of {list(keys)} or a flat '
        f'name -> tensor mapping, got {found}')


def save_state_dict(state_dict: StateDict,
                    path: str,
                    meta: Optional[dict] = None,
                    force: bool = False) -> None:
    """Write ``{'state_dict': ..., 'meta': ...}`` (loadable with
    ``weights_only=True``; ``meta`` must hold plain values only).

    Refuses an existing ``path`` unless ``force``; writes to a temporary
    file in the same directory and renames it, so a failed write leaves no
    partial file.
    """
    path = osp.abspath(path)
    if osp.exists(path) and not force:
        raise FileExistsError(f'{path} exists; pass --force to overwrite it')
    os.makedirs(osp.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix='.' + osp.basename(path),
                               dir=osp.dirname(path))
    os.close(fd)
    try:
        torch.save(dict(state_dict=state_dict, meta=meta or {}), tmp)
        os.replace(tmp, path)
    except BaseException:
        if osp.exists(tmp):
            os.remove(tmp)
        raise


def check_and_save(state_dict: StateDict,
                   model,
                   out: str,
                   meta: Optional[dict] = None,
                   force: bool = False,
                   drop_unexpected: bool = False,
                   log=print) -> KeyReport:
    """Check ``state_dict`` against ``model`` (a module, or a config built
    in mmpretrain's registry), log the report and save to ``out``.

    Shape mismatches raise :class:`ShapeMismatchError`; missing keys are
    logged (e.g. RoPE-Mixed frequencies when an APE model is converted to
    RoPE); unexpected keys raise :class:`ConversionError` unless
    ``drop_unexpected``, which leaves them out of the file.
    """
    if osp.exists(out) and not force:
        raise FileExistsError(f'{out} exists; pass --force to overwrite it')
    if isinstance(model, dict):
        import mmpos  # noqa: F401  (registers RoPEVisionTransformer)
        from mmengine.registry import DefaultScope
        from mmpretrain.registry import MODELS
        with DefaultScope.overwrite_default_scope('mmpretrain'):
            model = MODELS.build(copy.deepcopy(model))
    report = check_against_model(state_dict, model)
    log(str(report))
    if report.unexpected:
        if not drop_unexpected:
            raise ConversionError(
                f'{len(report.unexpected)} key(s) have no place in the '
                f'model: {report.unexpected}; pass --drop-unexpected to '
                'leave them out')
        state_dict = OrderedDict((k, v) for k, v in state_dict.items()
                                 if k not in report.unexpected)
    save_state_dict(state_dict, out, meta, force)
    log(f'saved {len(state_dict)} tensors to {out}')
    return report


# --------------------------------------------------------------------------
# Command line of the ViT converters (timm2mmpos, rope_vit_official2mmpos)
# --------------------------------------------------------------------------
def vit_converter_main(
        argv: Optional[Sequence[str]], doc: str, converter: str,
        src_help: str, rope_type: dict, keys: Sequence[str],
        convert: Callable[[StateDict, argparse.Namespace],
                          Tuple[StateDict, dict]]) -> None:
    """``SRC DST [--rope-type] [--num-heads N] [--no-head]
    [--drop-unexpected] [--force]`` of a ViT converter script.

    Loads SRC with :func:`load_weights`, takes its state dict (the first of
    ``keys``, see :func:`unwrap_state_dict`), leaves out ``head.*`` with
    ``--no-head``, maps it with ``convert(source, args) -> (state_dict,
    model config)`` and writes DST with :func:`check_and_save` (``meta``:
    source path, ``converter`` and the model config). ``rope_type`` holds
    the ``add_argument`` keywords of ``--rope-type``; ``doc``'s first
    paragraph describes the script. Conversion and file errors exit with
    status 1 and one line ``<prog>: error: <message>``.
    """
    parser = argparse.ArgumentParser(description=doc.split('\n\n')[0])
    parser.add_argument('src', help=src_help)
    parser.add_argument('dst', help='output checkpoint')
    parser.add_argument('--rope-type', **rope_type)
    parser.add_argument('--num-heads', type=int,
                        help='heads per block (default embed_dims // 64)')
    parser.add_argument('--no-head', action='store_true',
                        help='leave the classification head out')
    parser.add_argument('--drop-unexpected', action='store_true',
                        help='leave out keys the model has no place for')
    parser.add_argument('--force', action='store_true',
                        help='overwrite DST')
    args = parser.parse_args(argv)
    try:
        source = unwrap_state_dict(load_weights(args.src), keys)
        if args.no_head:
            source = {k: v for k, v in source.items()
                      if not k.startswith('head.')}
        state_dict, model = convert(source, args)
        check_and_save(
            state_dict, model, args.dst,
            meta=dict(source=osp.abspath(args.src), converter=converter,
                      model=model),
            force=args.force, drop_unexpected=args.drop_unexpected)
    except (ConversionError, OSError, ValueError, KeyError) as err:
        parser.exit(1, f'{parser.prog}: error: {err}\n')
