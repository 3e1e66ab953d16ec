"""Checkpoint retention that always leaves an intact, resumable checkpoint.

mmengine's ``CheckpointHook`` with ``max_keep_ckpts=k`` deletes the oldest
of its ``k`` checkpoints *before* it writes the new one: a run killed during
that save (``k=1``: the demo pretraining config) keeps no checkpoint at all,
and ``last_checkpoint`` still names the deleted file. :class:`IntactCheckpointHook`
orders the same steps so that a kill at any moment leaves one:

1. write the new checkpoint (the old ones stay);
2. point ``last_checkpoint`` at it, atomically (a kill leaves the old or
   the new name, never an empty file);
3. only then delete the outdated checkpoints.

The outdated steps are recorded in the message hub (``outdated_ckpt_ids``)
before the save, so that the checkpoint a resumed run starts from names what
its predecessor had still to delete; the resumed run deletes those files in
``before_train`` (and nothing else: only files this training wrote).

:meth:`IntactCheckpointHook.save_now` saves outside the interval, in the
same order, for a preempted run (:class:`~mmpos.engine.hooks.PreemptionHook`).
"""
import os.path as osp
from collections import deque

from mmengine.dist import is_main_process
from mmengine.hooks import CheckpointHook

from mmpos.registry import HOOKS
from mmpos.checkpoint import write_atomically


@HOOKS.register_module()
class IntactCheckpointHook(CheckpointHook):
    """mmengine's ``CheckpointHook`` (same arguments) that deletes checkpoints
    beyond ``max_keep_ckpts`` only after the new one is complete and
    ``<work_dir>/last_checkpoint`` names it (see the module docstring).

    mmpos' runtime bases set it as ``default_hooks.checkpoint``; mmdet and
    mmseg configs name it ``type='mmpretrain.IntactCheckpointHook'``.
    """

    def before_train(self, runner) -> None:
        super().before_train(runner)
        outdated = runner.message_hub.get_info('outdated_ckpt_ids', [])
        if self.max_keep_ckpts > 0 and outdated:
            # a resumed run: what the killed run had still to delete
            self._remove(outdated)
            runner.message_hub.update_info('outdated_ckpt_ids', [])

    def _save_checkpoint_with_step(self, runner, step, meta):
        outdated = []
        if self.max_keep_ckpts > 0 and not (self.keep_ckpt_ids and
                                            self.keep_ckpt_ids[-1] == step):
            ids = list(self.keep_ckpt_ids) + [step]
            outdated = ids[:-self.max_keep_ckpts]
            kept = ids[-self.max_keep_ckpts:]
            self.keep_ckpt_ids = deque(kept, self.max_keep_ckpts)
            runner.message_hub.update_info('keep_ckpt_ids', kept)
            runner.message_hub.update_info('outdated_ckpt_ids', outdated)
        self._save(runner, self.filename_tmpl.format(step), meta)
        self._remove(outdated)
        interim = runner.message_hub.get_info('interim_ckpt')
        if interim and is_main_process():  # an epoch run's save_now
            self.file_backend.remove(
                self.file_backend.join_path(self.out_dir, interim))
        runner.message_hub.update_info('outdated_ckpt_ids', [])
        runner.message_hub.update_info('interim_ckpt', None)

    def _save(self, runner, filename, meta) -> None:
        """Steps 1 and 2 of the module docstring: write ``filename``, then
        point ``last_checkpoint`` at it."""
        self.last_ckpt = self.file_backend.join_path(self.out_dir, filename)
        runner.message_hub.update_info('last_ckpt', self.last_ckpt)
        runner.save_checkpoint(
            self.out_dir,
            filename,
            self.file_client_args,
            save_optimizer=self.save_optimizer,
            save_param_scheduler=self.save_param_scheduler,
            meta=meta,
            by_epoch=self.by_epoch,
            backend_args=self.backend_args,
            **self.args)
        if is_main_process():
            write_atomically(
                str(self.last_ckpt).encode(),
                osp.join(runner.work_dir, 'last_checkpoint'))

    def save_now(self, runner) -> str:
        """Save the state after the current training iteration now (called
        in ``after_train_iter``) and return the checkpoint's path.

        An iteration-based run saves ``iter_<n>.pth`` as its interval
        would, with the same retention (nothing is written twice when the
        interval saved this iteration already). An epoch-based run saves
        ``iter_<n>.pth`` beside its ``epoch_<k>.pth`` files, outside the
        retention; the next regular save deletes it. mmengine resumes an
        epoch-based loop at the start of the interrupted epoch, so the
        resumed run repeats that epoch's batches.
        """
        step = runner.iter + 1
        meta = dict(epoch=runner.epoch, iter=step)
        if not self.by_epoch:
            path = self.file_backend.join_path(
                self.out_dir, self.filename_tmpl.format(step))
            if self.last_ckpt != path:
                self._save_checkpoint_with_step(runner, step, meta)
            return path
        filename = f'iter_{step}.pth'
        runner.message_hub.update_info('interim_ckpt', filename)
        self._save(runner, filename, meta)
        return self.last_ckpt

    def _remove(self, steps) -> None:
        """Delete the checkpoints of ``steps`` this hook wrote (files, or
        folders for sharded saves), on the main process only."""
        if not is_main_process():
            return
        for step in steps:
            path = self.file_backend.join_path(self.out_dir,
                                               self.filename_tmpl.format(step))
            if self.file_backend.isfile(path):
                self.file_backend.remove(path)
            elif self.file_backend.isdir(path):
                self.file_backend.rmtree(path)


__all__ = ['IntactCheckpointHook']
