"""Same seed + ``deterministic=True`` -> identical losses (issue 10).

Every pretraining algorithm's mini config is trained twice for a few
iterations through ``tools/train.py`` on CPU, in two processes with
different ``PYTHONHASHSEED`` (so set/dict-order dependence would show), and
every logged value but the timings must be bit-identical.
"""
import os
import subprocess
import sys

import pytest

from conftest import PRETRAIN_MINI_CONFIGS, REPO, read_scalars

NUM_ITERS = 3


@pytest.fixture
def start():
    """Start a training run; runs still going at teardown are killed."""
    started = []

    def run(config, work_dir, mini_data, hash_seed):
        started.append(subprocess.Popen(
            train_cmd(config, work_dir, mini_data), cwd=REPO,
            env={**os.environ, 'OMP_NUM_THREADS': '1',
                 'PYTHONHASHSEED': str(hash_seed)},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        return started[-1]

    yield run
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def train_cmd(config, work_dir, mini_data):
    return [
        sys.executable, 'tools/train.py', config, '--work-dir',
        str(work_dir), '--cfg-options',
        f'train_dataloader.dataset.data_root={mini_data}/unlabeled/',
        f'train_cfg.max_iters={NUM_ITERS}', 'default_hooks.logger.interval=1',
        'randomness.seed=0', 'randomness.deterministic=True'
    ]


def logged_values(proc, work_dir):
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-4000:]
    return [{k: v for k, v in r.items() if 'time' not in k}
            for r in read_scalars(work_dir)]


@pytest.mark.slow
@pytest.mark.parametrize('algo', sorted(PRETRAIN_MINI_CONFIGS))
def test_same_seed_same_losses(tmp_path, mini_data, algo, start):
    config = PRETRAIN_MINI_CONFIGS[algo]
    runs = [(start(config, tmp_path / str(i), mini_data, i), tmp_path / str(i))
            for i in (1, 2)]
    first, second = (logged_values(proc, work_dir) for proc, work_dir in runs)
    assert [r['iter'] for r in first] == list(range(1, NUM_ITERS + 1))
    assert all(any(k.startswith('loss') for k in r) for r in first)
    assert first == second
