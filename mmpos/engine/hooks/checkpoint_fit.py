"""Refuse a ``load_from`` / ``--resume`` / test checkpoint of another model.

mmengine's Runner loads these with ``strict=False``: a checkpoint of another
architecture loads nothing (or only what happens to match), logs a list of
keys and goes on with random weights. :class:`CheckpointFitHook` checks the
checkpoint against the model in ``after_load_checkpoint``, i.e. after the
file is read and before its tensors are copied into the model.
"""
import re
from typing import Optional

import torch
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.model import BaseTTAModel, is_model_wrapper

from mmpos.registry import HOOKS
from mmpos.utils.errors import CheckpointMismatchError

SHOWN = 3  # keys named in a message


def _names(keys) -> str:
    keys = sorted(keys)
    more = f' (+{len(keys) - SHOWN} more)' if len(keys) > SHOWN else ''
    return ', '.join(keys[:SHOWN]) + more


def _full_shapes(wrapper, model) -> dict:
    """``{state-dict key: shape}`` of ``model``; under FSDP (whose module
    holds flattened shards) the unsharded names and shapes, gathered for
    the moment of the check (every process takes part)."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    if not isinstance(wrapper, FSDP):
        return {k: v.shape for k, v in model.state_dict().items()}
    with FSDP.summon_full_params(wrapper, writeback=False,
                                 offload_to_cpu=True):
        tensors = [*model.named_parameters()] + [
            (f'{prefix}.{name}'.lstrip('.'), buffer)
            for prefix, module in model.named_modules()
            for name, buffer in module.named_buffers(recurse=False)
            if name not in module._non_persistent_buffers_set]
        return {k.replace('_fsdp_wrapped_module.', ''): v.shape
                for k, v in tensors}


@HOOKS.register_module()
class CheckpointFitHook(Hook):
    """Raise :class:`CheckpointMismatchError` for a checkpoint that does not
    fit the model.

    Args:
        checkpoint: the path being loaded, named in the message.
        strict: also refuse model keys that the checkpoint lacks or holds
            with another shape (resuming, testing). Otherwise (``load_from``
            for fine-tuning, where a new head is expected) only a checkpoint
            of which no tensor fits is refused.
    """
    priority = 'VERY_HIGH'  # before hooks that rewrite the checkpoint (EMA)

    def __init__(self, checkpoint: Optional[str] = None, strict: bool = True):
        self.checkpoint = checkpoint
        self.strict = strict

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        model = runner.model
        # DDP wrappers and test-time augmentation (test.py --tta) hold the
        # model as `.module`; mmengine loads the checkpoint into that one.
        if is_model_wrapper(model) or isinstance(model, BaseTTAModel):
            model = model.module
        name = f'{self.checkpoint or "the checkpoint"}'
        state = checkpoint.get('state_dict', checkpoint) if isinstance(
            checkpoint, dict) else checkpoint
        if not isinstance(state, dict):
            raise CheckpointMismatchError(
                f'{name} holds a {type(state).__name__}, not a checkpoint '
                '(a dict of tensors, or one under state_dict)')
        # The Runner strips DDP's 'module.' prefix (its revise_keys).
        state = {re.sub(r'^module\.', '', k): v for k, v in state.items()
                 if isinstance(v, torch.Tensor)}
        own = _full_shapes(runner.model, model)
        wrong = [k for k in set(state) & set(own)
                 if state[k].shape != own[k]]
        fits = set(state) & set(own) - set(wrong)
        missing = set(own) - set(state)
        what = type(model).__name__
        if not fits:
            raise CheckpointMismatchError(
                f'{name} does not fit {what}: none of its {len(state)} '
                f'tensors matches the model\'s {len(own)} by name and shape '
                f'(checkpoint keys: {_names(state)}; model keys: '
                f'{_names(own)}); another model\'s checkpoint?')
        if self.strict and (missing or wrong):
            raise CheckpointMismatchError(
                f'{name} does not fit {what}: {len(missing)} model tensors '
                f'missing ({_names(missing)}), {len(wrong)} of another shape '
                f'({_names(wrong)})')
        rest = (f'; {len(missing)} missing and {len(wrong)} of another shape '
                'stay as initialised' if missing or wrong else '')
        print_log(f'{name}: {len(fits)} of the model\'s {len(own)} tensors '
                  f'fit{rest}', logger='current')


__all__ = ['CheckpointFitHook']
