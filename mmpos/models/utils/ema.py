"""EMA teachers updated after the optimizer step, with or without FSDP.

DINOv2 / ICPF (``teacher``) and CR2PQ (``target_generator``) average their
student with mmengine averaged models (mmpretrain's ``CosineEMA``). The
update runs between two training steps (:class:`EMATeacherHook`: once
before training to copy the student, then after every optimizer step), so
the teacher of step ``t + 1`` is the EMA after the student's update of
step ``t``, in one process, under DDP and under FSDP alike.

Under FSDP (``configs/_base_/fsdp.py``: one unit per transformer block and
DINO head; mmengine's default ``use_orig_params=True``) the teacher lives inside the wrapped
model and is sharded like the student: teacher block ``i`` is an FSDP unit
with the same parameters, shapes and order as student block ``i``, so both
flat parameters are cut at the same offsets and every process holds the
same slice of each tensor of both. The update of those units is a local,
shard-by-shard average (as DINOv2's FSDP trainer does); no communication.
Student and teacher parameters left in the root unit (patch embedding,
tokens, final norm, ICPF's field) share one flat parameter at different
offsets, so they are gathered for the update
(``FSDP.summon_full_params(root, recurse=False, writeback=True)``), which
writes each process's slice back.
"""
from contextlib import nullcontext
from typing import Optional

import torch.nn as nn
from mmengine.model import BaseAveragedModel
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP


def _fsdp_units(module: nn.Module) -> list:
    """Names of the FSDP units inside ``module``."""
    return [name for name, m in module.named_modules() if isinstance(m, FSDP)]


def update_ema(ema: BaseAveragedModel, source: nn.Module,
               root: Optional[nn.Module] = None) -> None:
    """One step of ``ema`` towards ``source`` (``ema.update_parameters``:
    the first step copies ``source``, later ones average with the EMA's
    momentum schedule); call it outside the forward and backward.

    Args:
        ema: averaged model whose ``module`` mirrors ``source``.
        source: the student module(s) it averages.
        root: the model as the runner holds it; when it is an FSDP module,
            its root unit's parameters are gathered for the update and the
            other units are averaged shard by shard (module docstring).

    Raises:
        RuntimeError: teacher and student differ in parameter names, shapes
            or FSDP units (the shards would not correspond).
    """
    fsdp = isinstance(root, FSDP)
    gather = FSDP.summon_full_params(root, recurse=False, writeback=True) \
        if fsdp else nullcontext()
    with gather:
        teacher = dict(ema.module.named_parameters())
        student = dict(source.named_parameters())
        mismatch = sorted(set(teacher) ^ set(student)) or [
            k for k, v in teacher.items() if v.shape != student[k].shape]
        if fsdp and _fsdp_units(ema.module) != _fsdp_units(source):
            mismatch.append('FSDP units')
        if mismatch:
            raise RuntimeError(
                f'EMA teacher and student differ at {mismatch[:3]} '
                f'({len(mismatch)} in all); the teacher must be a copy of '
                'the student wrapped by the same FSDP policy')
        # under FSDP the tensors are this process's shards (or, in the root
        # unit, gathered views): read them now, not at construction
        ema.avg_parameters = teacher
        ema.update_parameters(source)


def check_teachers_set(model: nn.Module) -> None:
    """Raise unless every EMA teacher of ``model.ema_teachers()`` has been
    set from its student (step counter > 0), i.e. unless
    :class:`~mmpos.engine.hooks.EMATeacherHook` runs: without it the
    teachers would stay at their random initialisation. Checked on the
    first training forward only (no device sync per step)."""
    if model.__dict__.get('_teachers_set'):
        return
    for ema, _ in model.ema_teachers():
        if int(ema.steps) == 0:
            raise RuntimeError(
                f'{type(model).__name__}: the EMA teacher was never set from '
                'the student; EMATeacherHook (default_hooks.ema_teacher of '
                'configs/_base_/default_runtime_pretrain.py) sets it before '
                'training and updates it after every step')
    model._teachers_set = True
