"""Loading a pretraining checkpoint into a downstream backbone, loudly.

Transfer configs name the checkpoint once, as
``model.backbone.init_cfg = dict(type='Pretrained', checkpoint=PATH,
prefix='backbone.')``. mmengine's own ``PretrainedInit`` loads with
``strict=False`` and goes on when no key matched, which leaves a randomly
initialised backbone that trains and evaluates as if nothing were wrong (the
classic silent failure of transfer protocols). :func:`load_pretrained` is
used instead; it

1. refuses a path that does not exist or is not a complete checkpoint file
   (truncated, empty, another format; ``checkpoint=None`` is an explicit
   random initialisation and is logged as a warning);
2. loads with :func:`mmpos.utils.checkpoint_io.load_local_checkpoint`:
   ``torch.load(weights_only=True)``, or for an mmengine training
   checkpoint (what every pretraining run writes, its message hub needs
   unpickling) ``weights_only=False`` after checking that it pickles only
   mmengine's own classes;
3. unwraps ``state_dict`` / ``model`` and strips ``prefix`` (keys without it
   are dropped: ``backbone.`` keeps the student backbone of a pretraining
   checkpoint and leaves heads, necks and teachers out); a checkpoint in
   which no key has the prefix (a bare backbone state dict) is used as is;
4. raises when no key matches the module or when a matching key has another
   shape (e.g. a ViT-S checkpoint into a ViT-B), naming key and shapes;
5. logs the matched, missing and unexpected keys.
"""
import logging
import os.path as osp
from typing import Iterable, Optional, Tuple

import torch
import torch.nn as nn
from mmengine.logging import print_log

from mmpos.utils.checkpoint_io import checkpoint_problem, load_local_checkpoint
from mmpos.utils.errors import CheckpointMismatchError, CheckpointReadError

# `map_location` is accepted for mmengine compatibility; loading is on CPU.
PRETRAINED_KEYS = ('type', 'checkpoint', 'prefix', 'map_location')


def split_pretrained_cfg(init_cfg, default) -> Tuple[object, Optional[dict]]:
    """Separate a ``Pretrained`` entry from the random-init entries.

    Returns ``(random_init_cfg, pretrained_cfg)``. ``random_init_cfg`` is
    what remains of ``init_cfg`` (``default`` when nothing remains), so that
    weights the checkpoint lacks get a proper random initialisation before
    the checkpoint is loaded over it; ``pretrained_cfg`` is ``None`` without
    a ``Pretrained`` entry.
    """
    cfgs = init_cfg if isinstance(init_cfg, list) else [init_cfg]
    pretrained = [c for c in cfgs
                  if isinstance(c, dict) and c.get('type') == 'Pretrained']
    if not pretrained:
        return init_cfg, None
    if len(pretrained) > 1:
        raise ValueError(f'init_cfg has {len(pretrained)} Pretrained entries; '
                         f'give one: {init_cfg}')
    unknown = sorted(set(pretrained[0]) - set(PRETRAINED_KEYS))
    if unknown:
        raise ValueError(f'Pretrained init_cfg does not take {unknown}; its '
                         f'keys are {PRETRAINED_KEYS}')
    rest = [c for c in cfgs if c is not pretrained[0] and c is not None]
    return rest or default, dict(pretrained[0])


def _read(path: str) -> dict:
    """State dict of ``path`` (see the module docstring, steps 2 and 3)."""
    ckpt = load_local_checkpoint(path, map_location='cpu')
    for wrapper in ('state_dict', 'model'):
        if isinstance(ckpt, dict) and isinstance(ckpt.get(wrapper), dict):
            ckpt = ckpt[wrapper]
            break
    if not isinstance(ckpt, dict):
        raise CheckpointReadError(f'{path} holds a {type(ckpt).__name__}, '
                                  'not a state dict')
    return {k: v for k, v in ckpt.items() if isinstance(v, torch.Tensor)}


def _names(keys) -> str:
    return ', '.join(keys) if keys else '-'


def load_pretrained(module: nn.Module,
                    checkpoint: Optional[str],
                    prefix: str = 'backbone.',
                    resizable: Iterable[str] = ()) -> Optional[dict]:
    """Load the ``prefix`` part of ``checkpoint`` into ``module``.

    Args:
        module: the backbone to load into.
        checkpoint: local path, or ``None`` for an explicit random init.
        prefix: key prefix of the backbone in the checkpoint; stripped.
        resizable: keys whose shape the module's own load hooks adapt (the
            APE table, resized by ``_prepare_pos_embed``); not shape-checked.

    Returns:
        ``dict(matched=[...], missing=[...], unexpected=[...])`` (key lists),
        or ``None`` when ``checkpoint`` is ``None``.

    Raises:
        FileNotFoundError: no file at ``checkpoint``.
        CheckpointReadError: the file is not a complete checkpoint.
        CheckpointMismatchError: (a ``RuntimeError`` and ``ValueError``)
            no checkpoint key matches a key of ``module``, or a matching key
            has another shape.
    """
    name = type(module).__name__
    if checkpoint is None:
        print_log(f'{name}: init_cfg checkpoint=None, the weights stay '
                  'RANDOMLY initialised (set model.backbone.init_cfg.'
                  'checkpoint to a pretraining checkpoint to transfer it)',
                  logger='current', level=logging.WARNING)
        return None
    path = osp.expanduser(str(checkpoint))
    if not osp.isfile(path):
        raise FileNotFoundError(
            f'{name}: pretrained checkpoint not found: {checkpoint!r} '
            '(model.backbone.init_cfg.checkpoint)')
    problem = checkpoint_problem(path)
    if problem:
        raise CheckpointReadError(
            f'{name}: pretrained checkpoint {checkpoint!r} '
            f'(model.backbone.init_cfg.checkpoint) cannot be read: {problem}')
    state = _read(path)
    fields = [k for k in state if k.endswith('pos_field.field')]
    if fields and 'pos_embed' in module.state_dict():
        raise CheckpointMismatchError(
            f'{name}: {path} is an ICPF training checkpoint: its positions '
            f'live in {fields[0]!r}, not in the (untrained) backbone '
            f'pos_embed; convert it first: python tools/model_converters/'
            f'mmpos2backbone.py {path} backbone.pth --config <this config>')
    stripped = {k[len(prefix):]: v for k, v in state.items()
                if prefix and k.startswith(prefix)}
    if stripped:
        print_log(f'{len(stripped)} of {len(state)} checkpoint tensors start '
                  f'with {prefix!r}; using those, prefix stripped',
                  logger='current')
        state = stripped
    else:
        print_log(f'No checkpoint key starts with {prefix!r}: matching the '
                  f'{len(state)} keys as they are', logger='current')

    if hasattr(module, 'rename_legacy_keys'):  # e.g. per-block RoPE keys
        module.rename_legacy_keys(state)
    own = module.state_dict()
    matched = sorted(set(state) & set(own))
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    if not matched:
        raise CheckpointMismatchError(
            f'{name}: none of the {len(state)} tensors of {path} matches one '
            f'of its {len(own)} keys, so nothing would be loaded and the '
            'backbone would silently stay random. Checkpoint keys start with '
            f'{sorted(state)[:3]}, the model\'s with {sorted(own)[:3]}; '
            'check the checkpoint and init_cfg.prefix')
    resizable = set(resizable)
    wrong = [f'{k}: checkpoint {tuple(state[k].shape)} vs model '
             f'{tuple(own[k].shape)}' for k in matched
             if k not in resizable and state[k].shape != own[k].shape]
    if wrong:
        raise CheckpointMismatchError(
            f'{name}: {len(wrong)} tensors of {path} do not fit the model '
            '(another architecture?): ' + '; '.join(wrong))

    module.load_state_dict(state, strict=False)
    print_log(f'{name}: loaded {len(matched)} of its {len(own)} tensors from '
              f'{path}: {_names(matched)}', logger='current')
    level = logging.WARNING if missing or unexpected else logging.INFO
    print_log(f'{name}: {len(missing)} missing keys (left randomly '
              f'initialised): {_names(missing)}', logger='current',
              level=level)
    print_log(f'{name}: {len(unexpected)} unexpected checkpoint keys '
              f'(ignored): {_names(unexpected)}', logger='current',
              level=level)
    return dict(matched=matched, missing=missing, unexpected=unexpected)
