"""IntactCheckpointHook: a run SIGKILLed at any moment of a checkpoint save
keeps an intact checkpoint that ``--resume`` continues from bit-exactly
(issue 27); mmengine's CheckpointHook with ``max_keep_ckpts=1`` keeps none.

Each interrupted run is a real process killed with SIGKILL during the save
of ``iter_4.pth``: while the file is half written (what a non-atomic writer
leaves), once it is complete but before ``last_checkpoint`` names it, and
once ``last_checkpoint`` names it but before the outdated ones are deleted.
"""
import os
import signal
import subprocess
import sys

import pytest
import torch
from mmengine.model import BaseModel
from mmengine.runner import Runner
from torch.utils.data import Dataset

from conftest import REPO
from mmpos.engine.hooks import IntactCheckpointHook
from mmpos.checkpoint import checkpoint_problem, use_safe_io
from mmpos.guardrails.launch import resume_checkpoint

HOOKS = dict(IntactCheckpointHook=IntactCheckpointHook,
             CheckpointHook='CheckpointHook')
KILLED_AT = 4  # the save of iter_4.pth is interrupted
MAX_ITERS = 6


class Samples(Dataset):

    def __len__(self):
        return 5

    def __getitem__(self, index):
        return dict(inputs=torch.linspace(-1, 1, 16) * (index + 1))


class Model(BaseModel):

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(0, 1, 16))

    def forward(self, inputs, data_samples=None, mode='loss'):
        return dict(loss=(self.w * inputs).sum(1).sin().square().mean())


def make_runner(work_dir, hook, keep, name, resume=False):
    """A shuffled, momentum-SGD toy training saving every iteration, with
    the checkpoint I/O of mmpos' tools (safe reads of mmengine checkpoints,
    atomic writes)."""
    use_safe_io()
    return Runner(
        model=Model(),
        work_dir=str(work_dir),
        experiment_name=name,
        train_dataloader=dict(
            dataset=Samples(),
            sampler=dict(type='DefaultSampler', shuffle=True),
            batch_size=2, num_workers=0,
            collate_fn=dict(type='default_collate')),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1, momentum=0.9)),
        train_cfg=dict(by_epoch=False, max_iters=MAX_ITERS),
        default_hooks=dict(checkpoint=dict(
            type=HOOKS[hook], by_epoch=False, interval=1, max_keep_ckpts=keep)),
        randomness=dict(seed=0),
        resume=resume,
        load_from=resume_checkpoint(str(work_dir)) if resume else None)


# Run in a child process: the save of iter_4.pth dies at MOMENT.
KILLED = '''
import io, os, signal, sys
import torch
import mmengine.runner.runner as runner_module
import mmpos.engine.hooks.intact_checkpoint as intact
sys.path[:0] = ['tests', 'tests/engine/hooks']
from test_intact_checkpoint import KILLED_AT, make_runner

work_dir, hook, keep, moment = sys.argv[1:]
target = f'iter_{KILLED_AT}.pth'
save, point = runner_module.save_checkpoint, intact.write_atomically


def die():
    os.kill(os.getpid(), signal.SIGKILL)


def save_checkpoint(checkpoint, filename, *args, **kwargs):
    if not filename.endswith(target):
        return save(checkpoint, filename, *args, **kwargs)
    if moment == 'writing':
        data = io.BytesIO()
        torch.save(checkpoint, data)
        with open(filename, 'wb') as f:
            f.write(data.getvalue()[:len(data.getvalue()) // 2])
        die()
    save(checkpoint, filename, *args, **kwargs)
    if moment == 'written':
        die()


def write_atomically(data, path):
    point(data, path)
    if moment == 'pointed' and data.decode().endswith(target):
        die()


runner_module.save_checkpoint = save_checkpoint
intact.write_atomically = write_atomically
make_runner(work_dir, hook, int(keep), 'killed').train()
'''


def killed_run(work_dir, hook, keep, moment):
    result = subprocess.run(
        [sys.executable, '-c', KILLED, str(work_dir), hook, str(keep),
         moment], cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, 'PYTHONPATH': str(REPO), 'OMP_NUM_THREADS': '1'})
    assert result.returncode == -signal.SIGKILL, result.stderr[-3000:]


def steps(work_dir):
    return sorted(int(p.stem[5:]) for p in work_dir.glob('iter_*.pth'))


def momentum(runner):
    optimizer = runner.optim_wrapper.optimizer
    return optimizer.state[runner.model.w]['momentum_buffer']


@pytest.fixture(scope='module')
def uninterrupted(tmp_path_factory):
    runner = make_runner(tmp_path_factory.mktemp('full'),
                         'IntactCheckpointHook', 1, 'uninterrupted')
    runner.train()
    return runner


@pytest.mark.parametrize('keep', [1, 2, 3])
@pytest.mark.parametrize('moment', ['writing', 'written', 'pointed'])
def test_kill_during_a_save_keeps_a_resumable_checkpoint(
        tmp_path, keep, moment, uninterrupted):
    killed_run(tmp_path, 'IntactCheckpointHook', keep, moment)
    latest = resume_checkpoint(str(tmp_path))  # raises if none is intact
    assert checkpoint_problem(latest) is None
    newest = KILLED_AT if moment == 'pointed' else KILLED_AT - 1
    assert latest == str(tmp_path / f'iter_{newest}.pth')
    # nothing older than what max_keep_ckpts keeps was deleted too early
    kept = list(range(newest - keep + 1, newest + 1))
    assert set(kept) <= set(steps(tmp_path))

    resumed = make_runner(tmp_path, 'IntactCheckpointHook', keep,
                          f'resumed_{keep}_{moment}', resume=True)
    resumed.train()
    assert resumed.iter == MAX_ITERS
    assert torch.equal(resumed.model.w, uninterrupted.model.w)
    assert torch.equal(momentum(resumed), momentum(uninterrupted))
    # the resumed run finishes what the killed one had still to delete
    assert steps(tmp_path) == list(range(MAX_ITERS - keep + 1, MAX_ITERS + 1))
    assert (tmp_path / 'last_checkpoint').read_text() == str(
        tmp_path / f'iter_{MAX_ITERS}.pth')


def test_mmengine_checkpoint_hook_keeps_none(tmp_path):
    """The failure the hook prevents: mmengine deletes iter_3.pth before
    writing iter_4.pth, and last_checkpoint names the deleted file."""
    killed_run(tmp_path, 'CheckpointHook', 1, 'writing')
    assert steps(tmp_path) == [KILLED_AT]
    assert checkpoint_problem(tmp_path / f'iter_{KILLED_AT}.pth')
    assert not (tmp_path / f'iter_{KILLED_AT - 1}.pth').exists()
