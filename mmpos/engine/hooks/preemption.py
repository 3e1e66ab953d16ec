"""Preemption: a signal makes a training save and stop at the next iteration.

Slurm sends ``SIGTERM`` to every task of a job it preempts or whose time
runs out, then ``SIGKILL`` after its ``KillWait`` (30 s by default);
``srun --signal=TERM@120`` sends it 120 s before the time limit, and
torchrun forwards the ``SIGTERM`` it receives to its workers. Without a
handler the process dies at once and the progress since the last
checkpoint is lost. :class:`PreemptionHook` turns the signal into:

1. a flag, set by the handler (nothing else runs inside it);
2. at the end of the iteration in progress, the flag agreed on by every
   rank (one ``all_reduce`` of a 1-element tensor per iteration when
   distributed), so all ranks save at the same iteration;
3. an intact checkpoint of that iteration written by the run's
   :class:`~mmpos.engine.hooks.IntactCheckpointHook` and named by
   ``last_checkpoint`` (:meth:`IntactCheckpointHook.save_now`);
4. :class:`Preempted` raised, which ``tools/train.py`` reports in one line
   and turns into exit status :data:`PREEMPTED_EXIT_CODE`;
   ``tools/slurm_train.sh`` requeues on that status and the new run
   continues with ``--auto-resume``.

A second signal of the same kind, while the first is being handled, ends
the process at once (the default action), as a second Ctrl-C would.
``tools/train.py`` registers the hook for every run; a config may add it
to ``custom_hooks`` when it is run by another tool.
"""
import signal

import torch
import torch.distributed as torch_dist
from mmengine.hooks import Hook

from mmpos.registry import HOOKS

#: exit status of a run stopped by :class:`PreemptionHook` after saving:
#: ``EX_TEMPFAIL`` of sysexits.h, "try again later"
PREEMPTED_EXIT_CODE = 75


class Preempted(Exception):
    """A run stopped by a signal after saving an intact checkpoint."""

    def __init__(self, signal_name: str, iteration: int, checkpoint):
        self.signal_name = signal_name
        self.iteration = iteration
        self.checkpoint = checkpoint
        saved = (f'saved {checkpoint}; continue with --resume'
                 if checkpoint else 'no checkpoint saved (the run has no '
                 'IntactCheckpointHook)')
        super().__init__(f'preempted by {signal_name} after iteration '
                         f'{iteration}: {saved}')


@HOOKS.register_module()
class PreemptionHook(Hook):
    """Save an intact checkpoint and stop when one of ``signals`` arrives
    (see the module docstring).

    Args:
        signals (tuple[str]): the signal names to handle. Default:
            ``('SIGTERM', 'SIGUSR1')`` (Slurm's pre-kill signal and the
            usual ``--signal=USR1@T``).
    """

    priority = 'LOWEST'  # after the checkpoint hook's own save

    def __init__(self, signals=('SIGTERM', 'SIGUSR1')):
        self.signals = tuple(getattr(signal, name) for name in signals)
        self.received = None  # the first signal's name
        self._previous = {}

    def _handle(self, signum, frame):
        if self.received is not None:  # a second signal: the default
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)
        self.received = signal.Signals(signum).name

    def before_train(self, runner) -> None:
        from .intact_checkpoint import IntactCheckpointHook
        self.saver = next((h for h in runner.hooks
                           if isinstance(h, IntactCheckpointHook)), None)
        if self.saver is None:
            runner.logger.warning(
                'PreemptionHook: the run has no IntactCheckpointHook '
                '(default_hooks.checkpoint), so a preempted run stops '
                'without saving')
        for signum in self.signals:
            self._previous[signum] = signal.signal(signum, self._handle)

    def after_train_iter(self, runner, batch_idx, data_batch=None,
                         outputs=None) -> None:
        name = self._agreed_signal()
        if name is None:
            return
        self.after_train(runner)  # the default actions again
        iteration = runner.iter + 1
        path = self.saver.save_now(runner) if self.saver else None
        raise Preempted(name, iteration, path)

    def _agreed_signal(self):
        """The received signal's name if any rank received one, else None."""
        if not (torch_dist.is_available() and torch_dist.is_initialized()
                and torch_dist.get_world_size() > 1):
            return self.received
        device = 'cuda' if torch_dist.get_backend() == 'nccl' else 'cpu'
        flag = torch.tensor([0 if self.received is None else 1],
                            device=device)
        torch_dist.all_reduce(flag, op=torch_dist.ReduceOp.MAX)
        if not flag.item():
            return None
        return self.received or 'a signal to another rank'

    def after_train(self, runner) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous = {}


__all__ = ['PREEMPTED_EXIT_CODE', 'Preempted', 'PreemptionHook']
