"""mmpos / mmpretrain training checkpoints -> a backbone; ICPF's
positional field -> the backbone's APE."""
import math
from collections import OrderedDict
from typing import Optional, Sequence

from torch import Tensor

from mmpos.errors import ConversionError
from mmpos.checkpoint.read import StateDict
from mmpos.models.selfsup.icpf import field_to_pos_embed


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


#: pretraining backbones that mask their input -> the plain backbone that
#: runs the same weights on the whole image (their ``forward(x, mask=None)``)
MASKED_BACKBONES = {'MAERoPEViT': 'RoPEVisionTransformer'}


def plain_backbone_config(cfg: dict) -> dict:
    """The backbone config that runs ``cfg``'s weights outside its
    pretraining model: unmasked, eval-ready.

    A masked pretraining backbone (:data:`MASKED_BACKBONES`: ``MAERoPEViT``
    of MAE and DropPos, whose default forward keeps 25 % of the patches)
    becomes its plain parent with the same arguments, less the masking ones
    (``mask_ratio``) and with the masked class's own defaults where the two
    differ (``out_type='raw'``); the state dicts are the same. Any other
    config is returned as it is (a copy).
    """
    import inspect

    from mmpos.registry import MODELS
    cfg = dict(cfg)
    name = str(cfg.get('type')).split('.')[-1]
    if name not in MASKED_BACKBONES:
        return cfg
    masked = inspect.signature(MODELS.get(name).__init__).parameters
    plain = inspect.signature(
        MODELS.get(MASKED_BACKBONES[name]).__init__).parameters
    cfg['type'] = MASKED_BACKBONES[name]
    for arg, param in masked.items():
        if param.default is inspect.Parameter.empty:
            continue
        if arg not in plain:
            cfg.pop(arg, None)
        elif plain[arg].default != param.default:
            cfg.setdefault(arg, param.default)
    return cfg


def backbone_state(state_dict: StateDict,
                   prefix: str = 'backbone.',
                   grid: Optional[Sequence[int]] = None) -> StateDict:
    """The backbone tensors of a checkpoint's state dict, as the plain
    backbone holds them.

    The ``prefix`` part without the prefix (:func:`extract_backbone`; a
    state dict with no such key, e.g. an ``mmpos2backbone.py`` output, is
    taken as bare backbone keys); an ICPF positional field next to it
    (:func:`find_positional_field`) replaces ``pos_embed``, sampled on the
    ``grid`` patch grid (:func:`positional_field_to_ape`).
    """
    if not any(k.startswith((prefix, 'module.' + prefix))
               for k in state_dict):
        return OrderedDict(state_dict)
    backbone = extract_backbone(state_dict, prefix)
    field = find_positional_field(state_dict, prefix)
    if field is not None:
        backbone = positional_field_to_ape(backbone, field, grid)
    return backbone
