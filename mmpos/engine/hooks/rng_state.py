"""Carry the global random-number generators' states across a resume.

mmengine's resume restores the model (EMA teachers and buffers such as
DropPos' ``sigma`` included), the optimizer, the parameter schedulers, the
message hub and the loop counters, then reseeds from ``randomness.seed``.
The global generators thus restart from the seed instead of continuing:
the torch draws of the resumed run (masks, drop-path) differ from those of
an uninterrupted one, and so does any draw that is not replayed with the
dataloader (below). This hook stores the Python, numpy, torch (and CUDA)
generator states in every checkpoint it writes and puts them back when training continues from one, so a resumed
run reproduces an uninterrupted run exactly (with
``randomness.deterministic=True``).

When the states are put back, i.e. where the loop stood when they were
saved (checkpoints are written at the end of an iteration or epoch):

* ``IterBasedTrainLoop``: on resume it replays (loads and drops) the first
  ``runner.iter`` batches to bring the dataloader to its position; with
  ``num_workers=0`` that replay draws from the generators too. The states
  are restored after the replay, right before the first new batch is
  fetched.
* epoch-based loops resume at an epoch boundary: the states are restored
  at the start of that epoch, before its dataloader iterator is created.
  Iteration checkpoints inside an epoch (``CheckpointHook(by_epoch=False)``
  with an epoch-based loop) cannot be continued exactly: mmengine restarts
  the epoch.

Dataloader worker processes are not covered by the saved states: mmengine
seeds them from ``randomness.seed`` and the worker id, and the replay above
repeats their draws, so iteration-based runs stay exact with workers too.

Only the process that writes the checkpoint (rank 0) is recorded; in a
distributed run the other ranks keep their fresh seeds after a resume (a
warning says so). Loading weights with ``load_from`` (``runner.iter == 0``)
leaves the generators alone. The states are stored with tensors and Python
numbers only, so they add nothing that ``torch.load(weights_only=True)``
refuses.
"""
import random
from typing import Optional

import numpy as np
import torch
from mmengine.dist import get_rank, get_world_size
from mmengine.hooks import Hook
from mmengine.runner import IterBasedTrainLoop

from mmpos.registry import HOOKS

CHECKPOINT_KEY = 'rng_state'


def get_rng_state() -> dict:
    """States of Python's ``random``, numpy's legacy global generator, torch's
    CPU generator and (once CUDA is in use) the current CUDA device's."""
    np_state = np.random.get_state(legacy=False)
    state = dict(
        python=random.getstate(),
        numpy=dict(
            key=torch.from_numpy(np_state['state']['key'].astype(np.int64)),
            pos=int(np_state['state']['pos']),
            has_gauss=int(np_state['has_gauss']),
            gauss=float(np_state['gauss'])),
        torch=torch.get_rng_state())
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state['cuda'] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict) -> None:
    """Inverse of :func:`get_rng_state`."""
    version, internal, gauss_next = state['python']
    random.setstate((version, tuple(internal), gauss_next))
    np_state = state['numpy']
    np.random.set_state(
        dict(bit_generator='MT19937',
             state=dict(key=np_state['key'].numpy().astype(np.uint32),
                        pos=np_state['pos']),
             has_gauss=np_state['has_gauss'],
             gauss=np_state['gauss']))
    torch.set_rng_state(state['torch'])
    if 'cuda' in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state['cuda'])


class _RestoreAfterReplay:
    """Stands in for ``IterBasedTrainLoop.dataloader_iterator`` while the
    loop replays ``skip`` batches on resume; restores ``state`` just before
    the next batch is fetched and puts the loop's iterator back."""

    def __init__(self, loop: IterBasedTrainLoop, state: dict, skip: int):
        self.loop = loop
        self.iterator = loop.dataloader_iterator
        self.state = state
        self.skip = skip

    def __iter__(self):
        return self

    def __next__(self):
        if self.skip > 0:
            self.skip -= 1
        else:
            set_rng_state(self.state)
            self.loop.dataloader_iterator = self.iterator
        return next(self.iterator)


@HOOKS.register_module()
class RNGStateHook(Hook):
    """Save the global RNG states in checkpoints; restore them on resume.

    See the module docstring for when the states are restored. Mmpos's
    pretraining runtime base enables it as ``default_hooks.rng_state``.
    """
    priority = 'VERY_HIGH'

    def __init__(self):
        self._loaded: Optional[dict] = None  # from after_load_checkpoint
        self._epoch_state: Optional[dict] = None  # for before_train_epoch

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        checkpoint[CHECKPOINT_KEY] = get_rng_state()

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        self._loaded = checkpoint.get(CHECKPOINT_KEY)

    def before_train(self, runner) -> None:
        state, self._loaded = self._loaded, None
        if runner.iter == 0:  # fresh run, or weights only (load_from)
            return
        if state is None:
            runner.logger.warning(
                'RNGStateHook: the resumed checkpoint holds no RNG state; '
                'random draws restart from randomness.seed')
            return
        if get_world_size() > 1 and get_rank() != 0:
            runner.logger.warning(
                f'RNGStateHook: checkpoints hold the RNG state of rank 0 '
                f'only; rank {get_rank()} continues from its seed')
            return
        loop = runner.train_loop
        if isinstance(loop, IterBasedTrainLoop):
            loop.dataloader_iterator = _RestoreAfterReplay(
                loop, state, skip=runner.iter)
        else:
            self._epoch_state = state

    def before_train_epoch(self, runner) -> None:
        if self._epoch_state is not None:
            set_rng_state(self._epoch_state)
            self._epoch_state = None
