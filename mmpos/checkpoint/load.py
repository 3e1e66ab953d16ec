"""Loading a checkpoint file into a module: read, unwrap, strip, match.

* :func:`load_pretrained` -- a backbone's ``init_cfg=dict(type='Pretrained',
  checkpoint=PATH, prefix='backbone.')`` (lenient policy: missing keys keep
  their random init; nothing matching, or a shape that differs, is an
  error), and the backbone of :func:`mmpos.apis.init_backbone`.
* :func:`load_checkpoint_into` -- a whole model (the analysis tools,
  inference; strict policy by default: a backbone-only file for a detector
  or segmentor is refused, naming the fix).

Both read with :func:`~mmpos.checkpoint.read.read_checkpoint` and match with
:func:`~mmpos.checkpoint.match.load_state`.
"""
import logging
import re
from typing import Iterable, Optional

import torch.nn as nn
from mmengine.logging import print_log

from mmpos.errors import CheckpointMismatchError
from .match import KeyReport, load_state
from .read import StateDict, read_state_dict


def strip_prefix(state_dict: StateDict, prefix: str) -> StateDict:
    """Keys starting with ``prefix``, without it (others are dropped)."""
    return {k[len(prefix):]: v for k, v in state_dict.items()
            if k.startswith(prefix)}


def without_ddp_prefix(state_dict: StateDict) -> StateDict:
    """Keys without DDP's leading ``module.`` (as mmengine's Runner
    strips it with its ``revise_keys``)."""
    return {re.sub(r'^module\.', '', k): v for k, v in state_dict.items()}


def load_pretrained(module: nn.Module,
                    checkpoint: Optional[str],
                    prefix: str = 'backbone.',
                    resizable: Iterable[str] = ()) -> Optional[KeyReport]:
    """Load the ``prefix`` part of ``checkpoint`` into ``module``.

    ``prefix`` is stripped and keys without it are dropped (``backbone.``
    keeps the student backbone of a pretraining checkpoint and leaves heads,
    necks and teachers out); a checkpoint in which no key has the prefix (a
    bare backbone state dict) is used as is. The lenient policy applies
    (:mod:`mmpos.checkpoint.match`).

    Args:
        module: the backbone to load into.
        checkpoint: local path, or ``None`` for an explicit random init
            (logged as a warning).
        prefix: key prefix of the backbone in the checkpoint; stripped.
        resizable: keys whose shape the module's own load hooks adapt (the
            APE table, resized by ``_prepare_pos_embed``); not shape-checked.

    Returns:
        The :class:`~mmpos.checkpoint.match.KeyReport`, or ``None`` when
        ``checkpoint`` is ``None``.

    Raises:
        FileNotFoundError / IsADirectoryError: no file at ``checkpoint``.
        CheckpointReadError: the file is not a complete checkpoint.
        UnsafeCheckpointError: it pickles objects beyond mmengine's own.
        CheckpointMismatchError: (a ``RuntimeError`` and ``ValueError``)
            no key matches, a matching key has another shape, or an ICPF
            training checkpoint meets an APE backbone.
    """
    name = type(module).__name__
    if checkpoint is None:
        print_log(f'{name}: init_cfg checkpoint=None, the weights stay '
                  'RANDOMLY initialised (set model.backbone.init_cfg.'
                  'checkpoint to a pretraining checkpoint to transfer it)',
                  logger='current', level=logging.WARNING)
        return None
    state = read_state_dict(checkpoint,
                            f'{name}: model.backbone.init_cfg.checkpoint')
    fields = [k for k in state if k.endswith('pos_field.field')]
    if fields and 'pos_embed' in module.state_dict():
        raise CheckpointMismatchError(
            f'{name}: {checkpoint} is an ICPF training checkpoint: its '
            f'positions live in {fields[0]!r}, not in the (untrained) '
            'backbone pos_embed; convert it first: python tools/'
            f'model_converters/mmpos2backbone.py {checkpoint} backbone.pth '
            '--config <this config>')
    stripped = strip_prefix(state, prefix) if prefix else {}
    if stripped:
        print_log(f'{len(stripped)} of {len(state)} checkpoint tensors start '
                  f'with {prefix!r}; using those, prefix stripped',
                  logger='current')
        state = stripped
    else:
        print_log(f'No checkpoint key starts with {prefix!r}: matching the '
                  f'{len(state)} keys as they are', logger='current')
    return load_state(
        module, state, 'lenient', f'pretrained checkpoint {checkpoint}',
        resizable, hint='check the checkpoint and init_cfg.prefix')


def load_checkpoint_into(model: nn.Module,
                         checkpoint: str,
                         policy: str = 'strict',
                         what: str = 'checkpoint') -> KeyReport:
    """Load a checkpoint of a whole model (``state_dict`` of what
    ``tools/train.py`` writes, or a converter's output) into ``model``.

    DDP's ``module.`` prefix is stripped. ``policy`` (default ``strict``:
    every tensor of ``model`` present with its shape, nothing unexpected)
    is applied before anything is copied; a backbone-only file for a model
    with a neck or head is refused with the fix (use it as the backbone's
    ``init_cfg``).

    Raises:
        as :func:`load_pretrained`.
    """
    state = without_ddp_prefix(read_state_dict(checkpoint, what))
    return load_state(model, state, policy, f'{what} {checkpoint}')
