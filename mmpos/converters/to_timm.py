"""mmpos ``RoPEVisionTransformer`` -> timm: the inverse of :mod:`.timm`.

The target is the timm model of the backbone's family, sized by timm
``model_args`` (:func:`timm_target`):

==================================  ========================================
mmpos backbone                      timm model (``size``: small/base/large
                                    by width, else small's with the sizes)
==================================  ========================================
``rope=dict(type='axial')``         ``vit_{size}_patch16_rope[_ape]_224``
``rope=dict(type='mixed')``         ``vit_{size}_patch16_rope_mixed[_ape]_224``
``'dinov3'`` (axial, rotate-half)   ``vit_{size}_patch16_dinov3[_qkvb]``
``rope=None`` with registers        ``vit_{size}_patch14_reg4_dinov2``
``rope=None`` without               ``vit_{size}_patch16_224``
==================================  ========================================

Keys are mapped with :mod:`.vit`'s tables, read backwards: every key of the
timm model takes the mmpos tensor that :func:`~.vit.rename_key` maps it to
(:func:`timm_state_dict`); the value changes of
:func:`~.timm.convert_timm_vit` are inverted (per-block RoPE-Mixed
frequencies stacked,
``qkv.bias`` split into EVA's ``q_bias`` / ``v_bias``, the class-token slot
of ``pos_embed`` folded into ``cls_token`` for models that add no position
to it). Schemes timm has no model for, window attention, a key bias where
timm has none and tensors left without a place are refused; the export
checks timm's tokens against mmpos' (:func:`export_to_timm`). timm is
imported only here, when exporting.
"""
import copy
import json
import os
import os.path as osp
import shutil
import tempfile
from collections import OrderedDict
from typing import Optional, Sequence, Tuple

import torch
import torch.nn as nn

from mmpos.checkpoint.read import StateDict
from mmpos.errors import ConversionError
from .vit import rename_key

TIMM_SIZES = {384: 'small', 768: 'base', 1024: 'large'}
#: mmpos position schemes with a timm counterpart
EXPORTABLE = ('axial', 'mixed', 'dinov3', 'none')
_LAYER_SCALES = ('attn.gamma1.weight', 'ffn.gamma2.weight')


def scheme_name(backbone: nn.Module) -> str:
    """The backbone's position scheme by its registered name, ``'none'``
    without one and ``'dinov3'`` for axial RoPE in the rotate-half layout
    (:data:`~.vit.DINOV3_BACKBONE`)."""
    from mmpos_positions import SCHEMES
    rope = backbone.rope
    if rope is None:
        return 'none'
    name = next((k for k, v in SCHEMES.items() if type(rope) is v),
                type(rope).__name__)
    if name in ('axial', 'dinov3'):
        return 'dinov3' if rope.layout == 'half' else 'axial'
    return name


def timm_target(backbone: nn.Module) -> Tuple[str, dict]:
    """``(timm model name, model_args)`` of an mmpos
    ``RoPEVisionTransformer`` (the table of the module docstring).

    Raises:
        ConversionError: one line naming what timm has no model for (a
            backbone other than ``RoPEVisionTransformer``, the position
            scheme, window attention, no class token).
    """
    from mmpos.models.backbones import RoPEVisionTransformer
    if not isinstance(backbone, RoPEVisionTransformer):
        raise ConversionError(
            f'mmpos2timm exports RoPEVisionTransformer backbones; this one '
            f'is a {type(backbone).__name__}')
    scheme = scheme_name(backbone)
    if scheme not in EXPORTABLE:
        raise ConversionError(
            f'timm has no model with the {scheme!r} position scheme; '
            f'mmpos2timm exports {EXPORTABLE[:-1]} RoPE or none')
    if any(layer.window_size for layer in backbone.layers):
        raise ConversionError('timm has no ViT with window attention '
                              '(window_size > 0): export a global model')
    if backbone.cls_token is None:
        raise ConversionError('the timm models have a class token; this '
                              'backbone has none (with_cls_token=False)')
    width = backbone.embed_dims
    size = TIMM_SIZES.get(width, 'small')
    layer = backbone.layers[0]
    registers = backbone.num_register_tokens
    args = dict(
        img_size=list(backbone.img_size), patch_size=backbone.patch_size[0],
        embed_dim=width, depth=backbone.num_layers,
        num_heads=layer.attn.num_heads,
        mlp_ratio=layer.ffn.layers[0][0].out_features / width)
    if not isinstance(layer.attn.gamma1, nn.Identity):
        args['init_values'] = 1e-5  # LayerScale (the values are loaded)
    has_bias = layer.attn.qkv.bias is not None
    if scheme == 'none':
        name = (f'vit_{size}_patch14_reg4_dinov2' if registers
                else f'vit_{size}_patch16_224')
        return name, dict(args, reg_tokens=registers, no_embed_class=True,
                          qkv_bias=has_bias)
    if scheme == 'dinov3':
        name = f'vit_{size}_patch16_dinov3' + ('_qkvb' if has_bias else '')
        return name, dict(args, num_reg_tokens=registers)
    ape = '_ape' if backbone.pos_embed is not None else ''
    mixed = '_mixed' if scheme == 'mixed' else ''
    return (f'vit_{size}_patch16_rope{mixed}{ape}_224',
            dict(args, num_reg_tokens=registers, qkv_bias=has_bias))


def timm_state_dict(state: StateDict, target: StateDict) -> StateDict:
    """mmpos backbone tensors (bare keys) in the layout of ``target`` (the
    timm model's own state dict: its keys and shapes). A LayerScale that
    timm's model always has (EVA) and the backbone lacks is 1.

    Raises:
        ConversionError: a timm key without its mmpos tensor, a shape that
            differs, a non-zero key bias for EVA's ``q_bias`` / ``v_bias``,
            or mmpos tensors that no timm key takes (all named).
    """
    used, out = set(), OrderedDict()
    pos = state.get('pos_embed')
    # timm adds no position to the class token: the slot joins the token
    fold = pos is not None and 'pos_embed' in target and \
        target['pos_embed'].shape[1] == pos.shape[1] - 1

    def take(key):
        if key not in state:
            raise ConversionError(f'timm key {timm_key} needs mmpos {key}, '
                                  'which the backbone does not have')
        used.add(key)
        return state[key]

    for timm_key, ref in target.items():
        if timm_key == 'rope.freqs':  # (2, depth, heads, D/2)
            value = torch.stack([take(f'rope.freqs.{i}')
                                 for i in range(ref.shape[1])], dim=1)
        elif timm_key.endswith(('.attn.q_bias', '.attn.v_bias')):
            attn = timm_key[:-len('q_bias')]
            bias = take(rename_key(attn + 'qkv') + '.bias').chunk(3)
            if bias[1].any():
                raise ConversionError(
                    f'{attn}qkv: timm keeps the key bias at 0, this '
                    'backbone has a non-zero one')
            value = bias[0] if timm_key.endswith('q_bias') else bias[2]
        elif timm_key == 'pos_embed' and fold:
            value = take('pos_embed')[:, 1:]
        elif timm_key == 'cls_token' and fold:
            value = take('cls_token') + pos[:, :1]
        elif rename_key(timm_key).endswith(_LAYER_SCALES) and \
                rename_key(timm_key) not in state:
            value = torch.ones_like(ref)  # LayerScale 1: as without one
        else:
            value = take(rename_key(timm_key))
        if value.shape != ref.shape:
            raise ConversionError(
                f'timm key {timm_key}: shape {tuple(ref.shape)}, the mmpos '
                f'tensor has {tuple(value.shape)}')
        out[timm_key] = value.detach().clone().contiguous()
    left = sorted(set(state) - used)
    if left:
        raise ConversionError(f'{len(left)} mmpos tensor(s) have no place in '
                              f'the timm model: {left[:6]}')
    return out


def mmpos_tokens(backbone: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """All tokens ``(B, N, C)`` after the final norm (timm's
    ``forward_features``)."""
    raw = copy.deepcopy(backbone).eval()
    raw.out_type, raw.out_indices = 'raw', [raw.num_layers - 1]
    with torch.no_grad():
        return raw(images)[0]


def token_error(backbone: nn.Module, model: nn.Module,
                size: Sequence[int]) -> float:
    """Largest difference between timm ``model``'s tokens and
    ``backbone``'s on a random ``(1, 3, *size)`` image (seed 0), relative
    to the tokens' scale."""
    images = torch.randn(1, 3, *size,
                         generator=torch.Generator().manual_seed(0))
    ours = mmpos_tokens(backbone, images)
    with torch.no_grad():
        theirs = model.forward_features(images)
    if ours.shape != theirs.shape:
        return float('inf')
    return ((ours - theirs).abs().max() / theirs.abs().max()).item()


def other_size(backbone: nn.Module) -> Tuple[int, int]:
    """A non-square input size other than the backbone's ``img_size``
    (two more patch rows, one more patch column)."""
    (h, w), (ph, pw) = backbone.img_size, backbone.patch_size
    return h + 2 * ph, w + pw


def export_to_timm(backbone: nn.Module, rtol: float = 1e-4):
    """The timm model holding ``backbone``'s weights (loaded strictly), its
    ``model_args`` and the largest token difference on a random image at
    the backbone's ``img_size``, relative to the tokens' scale.

    ``model_args`` hold ``dynamic_img_size=True`` (timm computes the
    positions for each input's grid) where timm's model with it also gives
    the backbone's tokens at :func:`other_size`: RoPE without APE (axial,
    mixed, DINOv3). An APE table is resized by timm otherwise than by
    mmpos (0.2-0.7 % of the tokens' scale), so APE models keep their
    fixed input size.

    Raises:
        ConversionError: see :func:`timm_target` and
            :func:`timm_state_dict`; timm's tokens differ by more than
            ``rtol`` (an option timm's model does not share).
    """
    try:
        import timm
    except ImportError as err:
        raise ConversionError('exporting to timm needs timm (pip install '
                              'timm==1.0.31)') from err
    name, model_args = timm_target(backbone)

    def build(**extra):
        model = timm.create_model(name, pretrained=False, num_classes=0,
                                  **model_args, **extra).eval()
        model.load_state_dict(
            timm_state_dict(backbone.state_dict(), model.state_dict()),
            strict=True)
        return model

    model = build()
    error = token_error(backbone, model, backbone.img_size)
    if not error <= rtol:
        raise ConversionError(
            f'timm {name} gives other tokens than the backbone (max '
            f'relative difference {error:.2g} > {rtol:g}): an option of the '
            'backbone (norm eps, RoPE frequencies, coordinate frame, ...) '
            'differs from the timm model\'s')
    dynamic = build(dynamic_img_size=True)
    if max(token_error(backbone, dynamic, size)
           for size in (backbone.img_size, other_size(backbone))) <= rtol:
        model, model_args = dynamic, dict(model_args, dynamic_img_size=True)
    return model, model_args, error


def save_timm_folder(backbone: nn.Module, folder: str, force: bool = False,
                     source: Optional[str] = None,
                     mean_std: Optional[Sequence[Sequence[float]]] = None
                     ) -> Tuple[str, float]:
    """Write ``folder`` for the hub (nothing is uploaded): timm's own
    ``save_for_hf`` layout, ``model.safetensors`` and ``config.json``
    (``architecture``, ``model_args``, ``pretrained_cfg``), plus a
    ``README.md`` model card; ``timm.create_model('local-dir:<folder>',
    pretrained=True)`` or ``'hf-hub:<repo>'`` after an upload builds and
    loads it. ``pretrained_cfg`` is the backbone's, not the timm family's
    released weights': tag ``mmpos``, the backbone's input size, ``mean_std``
    (RGB, 0-1; default the family's) and no license (the card says
    ``other``: set it before uploading). Written to a temporary folder
    beside ``folder``, then renamed.

    Returns:
        The timm model name, the token difference of :func:`export_to_timm`
        and whether the model takes any input size (``dynamic_img_size``;
        ``pretrained_cfg['fixed_input_size']`` is its negation).

    Raises:
        FileExistsError: ``folder`` exists and not ``force``.
        ConversionError: see :func:`export_to_timm`.
    """
    from timm.models import save_for_hf
    from timm.models._hub import generate_readme
    if osp.exists(folder) and not force:
        raise FileExistsError(f'{folder} exists; pass --force to replace it')
    model, model_args, error = export_to_timm(backbone)
    name = model.pretrained_cfg['architecture']
    parent = osp.dirname(osp.abspath(folder))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix='.mmpos2timm-', dir=parent)
    try:
        save_for_hf(model, tmp, model_args=model_args,
                    safe_serialization=True)
        config_path = osp.join(tmp, 'config.json')
        with open(config_path) as f:
            config = json.load(f)
        pretrained = config['pretrained_cfg']
        pretrained.pop('license', None)
        dynamic = bool(model_args.get('dynamic_img_size'))
        pretrained.update(tag='mmpos', input_size=[3, *backbone.img_size],
                          fixed_input_size=not dynamic)
        if mean_std is not None:
            pretrained.update(mean=list(mean_std[0]), std=list(mean_std[1]))
        with open(config_path, 'w') as f:
            json.dump(config, f, indent=2)
        card = dict(
            license='other',
            description=(
                f'{name} weights exported from an mmpos '
                f'RoPEVisionTransformer ({scheme_name(backbone)} positions'
                f'{", " + source if source else ""}) by '
                'tools/model_converters/mmpos2timm.py: timm\'s tokens equal '
                f"mmpos' (max relative difference {error:.1g}, fp32). "
                f"Load with timm.create_model('local-dir:<this folder>', "
                "pretrained=True), or 'hf-hub:<repo>' once uploaded; "
                'num_classes=0 (features).'),
            details={'Model Type': 'Image feature backbone',
                     'Params (M)': round(sum(
                         p.numel() for p in model.parameters()) / 1e6, 2),
                     'Image size': 'x'.join(map(str, backbone.img_size)) +
                     (' (any multiple of the patch)' if dynamic else '')})
        with open(osp.join(tmp, 'README.md'), 'w') as f:
            f.write(generate_readme(card, name,
                                    task_name='image-feature-extraction'))
        if osp.exists(folder):
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return name, error, dynamic
