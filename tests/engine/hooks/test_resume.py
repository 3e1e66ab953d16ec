"""Resuming after a kill continues training exactly (issue 10, reliability).

Unit tests run a toy model in-process through mmengine's iteration- and
epoch-based loops; the end-to-end tests SIGKILL ``tools/train.py`` on a mini
config right after its first checkpoint, resume it with ``--resume`` and
compare with an uninterrupted run: every logged value (losses, lr, DropPos'
sigma) at every later iteration and the final checkpoint (weights, EMA
teacher and its step counter, sigma buffer, optimizer, schedulers, RNG
states) must be identical.

Checkpoint intervals: iteration-based runs may be killed and resumed at any
iteration checkpoint (mmengine replays the dataloader up to it and
``RNGStateHook`` restores the generators after that replay); epoch-based
runs resume exactly from epoch checkpoints only.
"""
import os
import random
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from mmengine.model import BaseModel
from mmengine.runner import Runner
from torch.utils.data import Dataset

from conftest import REPO, read_scalars
from mmpos.engine.hooks import RNGStateHook
from mmpos.engine.hooks.rng_state import get_rng_state, set_rng_state
from mmpos.checkpoint import read_checkpoint, use_safe_io


@pytest.fixture(autouse=True)
def no_epoch_transition_pause(monkeypatch):
    """mmengine's iteration-based loop sleeps 2 s at each epoch transition
    (for worker processes; the toy runs have none)."""
    import mmengine.runner.loops as loops
    monkeypatch.setattr(loops, 'time', SimpleNamespace(sleep=lambda _: None))
    use_safe_io()  # as tools/train.py: mmengine checkpoints load, saves atomic


def draws():
    return (random.random(), np.random.rand(), torch.rand(1).item())


def test_rng_state_round_trip_and_weights_only(tmp_path):
    state = get_rng_state()
    first = [draws() for _ in range(3)]
    torch.save(state, tmp_path / 'rng.pth')
    # only tensors and Python numbers: loadable with weights_only=True
    set_rng_state(torch.load(tmp_path / 'rng.pth', weights_only=True))
    assert [draws() for _ in range(3)] == first


class RandomDataset(Dataset):
    """Each sample draws from numpy (as mmcv's random transforms do)."""

    def __len__(self):
        return 8

    def __getitem__(self, index):
        return dict(inputs=torch.tensor([index + np.random.rand()]))


class RandomLossModel(BaseModel):
    """The loss draws from torch (as masking / drop-path do); every
    iteration's inputs, draw and loss are recorded in ``steps``."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(1))
        self.steps = []

    def forward(self, inputs, data_samples=None, mode='loss'):
        noise = torch.rand(1)
        loss = ((self.w * inputs).mean() - noise).square().sum()
        self.steps.append((inputs.tolist(), noise.item(), loss.item()))
        return dict(loss=loss)


def toy_runner(work_dir, by_epoch, with_hook, resume=False, load_from=None):
    loop = (dict(by_epoch=True, max_epochs=3) if by_epoch else
            dict(by_epoch=False, max_iters=9))
    return Runner(
        model=RandomLossModel(),
        work_dir=str(work_dir),
        experiment_name=f'{work_dir.name}_{resume}_{load_from is not None}',
        train_dataloader=dict(
            dataset=RandomDataset(),
            sampler=dict(type='DefaultSampler', shuffle=True),
            batch_size=2,  # 4 iterations per epoch
            num_workers=0,
            collate_fn=dict(type='default_collate')),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1, momentum=0.9)),
        train_cfg=loop,
        default_hooks=dict(
            logger=dict(type='LoggerHook', interval=1),
            checkpoint=dict(type='CheckpointHook', by_epoch=by_epoch,
                            interval=1 if by_epoch else 3)),
        custom_hooks=[RNGStateHook()] if with_hook else [],
        randomness=dict(seed=0),
        resume=resume,
        load_from=load_from and str(load_from))


@pytest.mark.parametrize('by_epoch, ckpt, done', [(False, 'iter_6.pth', 6),
                                                  (True, 'epoch_1.pth', 4)])
@pytest.mark.parametrize('with_hook', [True, False])
def test_toy_resume_continues_rng(tmp_path, by_epoch, ckpt, done, with_hook):
    """Iteration checkpoint 6 (its replay crosses an epoch boundary) and
    epoch checkpoint 1 resume to identical inputs, draws and losses with the
    hook; without it the torch draws restart from the seed and differ."""
    full = toy_runner(tmp_path, by_epoch, with_hook)
    full.train()
    resumed = toy_runner(tmp_path, by_epoch, with_hook, resume=True,
                         load_from=tmp_path / ckpt)
    resumed.train()
    expected = full.model.steps[done:]
    assert len(resumed.model.steps) == len(expected) > 0
    if with_hook:
        assert resumed.model.steps == expected
    else:
        assert resumed.model.steps != expected


def test_load_from_leaves_rng_alone(tmp_path):
    """Loading weights (``load_from`` without resume) starts the draws from
    the seed like a fresh run, not from the checkpoint's RNG state."""
    toy_runner(tmp_path / 'a', False, True).train()
    fresh = toy_runner(tmp_path / 'b', False, True)
    fresh.train()
    loaded = toy_runner(tmp_path / 'c', False, True,
                        load_from=tmp_path / 'a' / 'iter_9.pth')
    loaded.train()
    assert [s[:2] for s in loaded.model.steps] == \
        [s[:2] for s in fresh.model.steps]
    assert loaded.model.steps != fresh.model.steps  # other weights


# --- end to end: SIGKILL + --resume through tools/train.py -----------------

E2E = {
    # EMA teacher (CosineEMA with its step buffer), Sinkhorn centring,
    # masking and drop-path draws, weight-decay schedule
    'dinov2': 'configs/dinov2/dinov2_vit-tiny_mini.py',
    # sigma schedule (DropPosSigmaHook), random drop / position masks
    'droppos': 'configs/droppos/droppos_vit-tiny_mini.py',
}
MAX_ITERS, INTERVAL = 12, 4


def train_cmd(config, work_dir, mini_data, *extra):
    """tools/train.py with deterministic settings; 8-image batches cross an
    epoch boundary (64 images) at iteration 8."""
    return [
        sys.executable, 'tools/train.py', config, '--work-dir',
        str(work_dir), *extra, '--cfg-options',
        f'train_dataloader.dataset.data_root={mini_data}/unlabeled/',
        'train_dataloader.batch_size=8', f'train_cfg.max_iters={MAX_ITERS}',
        f'default_hooks.checkpoint.interval={INTERVAL}',
        'default_hooks.checkpoint.max_keep_ckpts=3',
        'default_hooks.logger.interval=1', 'randomness.seed=0',
        'randomness.deterministic=True'
    ]


@pytest.fixture
def start():
    """Start a command in its own process group; groups still running at
    teardown (a failed test) are killed."""
    started = []

    def run(cmd):
        env = {**os.environ, 'OMP_NUM_THREADS': '1'}
        started.append(subprocess.Popen(
            cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, start_new_session=True))
        return started[-1]

    yield run
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


def finish(proc, timeout=600):
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out[-4000:]


def kill_after_first_checkpoint(proc, work_dir, timeout=600):
    """SIGKILL the process group once ``last_checkpoint`` names a saved
    checkpoint (mmengine writes it after the .pth file is complete)."""
    marker = work_dir / 'last_checkpoint'
    deadline = time.monotonic() + timeout
    while not (marker.is_file() and marker.read_text().strip()):
        assert proc.poll() is None, proc.communicate()[0][-4000:]
        assert time.monotonic() < deadline, 'no checkpoint written'
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    return marker.read_text().strip()


def logged(records, after):
    """Per-iteration logged values after iteration ``after``, timings out."""
    return {
        r['iter']: {k: v for k, v in r.items() if 'time' not in k}
        for r in records if r['iter'] > after
    }


def assert_same(a, b, path='checkpoint'):
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b), path
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            assert_same(a[key], b[key], f'{path}.{key}')
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f'{path}[{i}]')
    else:
        assert a == b, path


@pytest.mark.slow
@pytest.mark.parametrize('algo', sorted(E2E))
def test_sigkill_and_resume_matches_uninterrupted(tmp_path, mini_data, algo,
                                                  start):
    config = E2E[algo]
    full_dir, killed_dir = tmp_path / 'full', tmp_path / 'killed'
    full = start(train_cmd(config, full_dir, mini_data))
    killed = start(train_cmd(config, killed_dir, mini_data))
    ckpt = kill_after_first_checkpoint(killed, killed_dir)
    done = int(ckpt.rsplit('iter_', 1)[1].split('.')[0])
    assert 0 < done < MAX_ITERS, ckpt  # killed mid-run

    resumed = start(train_cmd(config, killed_dir, mini_data, '--resume'))
    finish(resumed)
    finish(full)

    expected = logged(read_scalars(full_dir), done)
    got = logged(read_scalars(killed_dir), done)  # the resumed run's log
    assert sorted(got) == list(range(done + 1, MAX_ITERS + 1))
    assert got == expected

    final = f'iter_{MAX_ITERS}.pth'
    a = read_checkpoint(str(full_dir / final))
    b = read_checkpoint(str(killed_dir / final))
    assert a['meta']['iter'] == b['meta']['iter'] == MAX_ITERS
    for key in ('state_dict', 'optimizer', 'param_schedulers', 'rng_state'):
        assert_same(a[key], b[key], key)
    if algo == 'dinov2':  # CosineEMA's step counter continued: the copy
        # before training, then one update after every iteration
        steps = [v for k, v in b['state_dict'].items() if k.endswith('steps')]
        assert steps and all(int(s) == MAX_ITERS + 1 for s in steps), steps
    else:  # sigma of the last iteration (Eq. 7: 1 - 11/12)
        assert b['state_dict']['head.sigma'].item() == pytest.approx(1 / 12)
