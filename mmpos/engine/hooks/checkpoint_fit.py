"""Refuse a ``load_from`` / ``--resume`` / test checkpoint of another model.

mmengine's Runner loads these with ``strict=False``: a checkpoint of another
architecture loads nothing (or only what happens to match), logs a list of
keys and goes on with random weights. :class:`CheckpointFitHook` checks the
checkpoint against the model in ``after_load_checkpoint``, i.e. after the
file is read and before its tensors are copied into the model, with the key
report and policies of :mod:`mmpos.checkpoint.match`.
"""
from typing import Optional

import torch
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.model import BaseTTAModel, is_model_wrapper

from mmpos.checkpoint import compare, without_ddp_prefix
from mmpos.errors import CheckpointMismatchError
from mmpos.registry import HOOKS


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
        strict: the ``strict`` policy (resuming, testing: every model tensor
            present with its shape, nothing unexpected). Otherwise
            (``load_from`` for fine-tuning, where a new head is expected)
            the ``partial`` policy: only a checkpoint of which no tensor
            fits by name and shape is refused.
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
        state = without_ddp_prefix(
            {k: v for k, v in state.items() if isinstance(v, torch.Tensor)})
        report = compare(state, _full_shapes(runner.model, model))
        report.enforce('strict' if self.strict else 'partial', name,
                       type(model).__name__)
        rest = (f'; {len(report.missing)} missing and '
                f'{len(report.mismatched)} of another shape stay as '
                'initialised' if report.missing or report.mismatched else '')
        own = len(report.matched) + len(report.mismatched) + len(
            report.missing)
        print_log(f'{name}: {len(report.matched)} of the model\'s {own} '
                  f'tensors fit{rest}', logger='current')


__all__ = ['CheckpointFitHook']
