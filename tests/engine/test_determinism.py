"""Same seed + ``deterministic=True`` -> identical losses (issue 10).

Every pretraining algorithm's mini config is trained for a few iterations
through ``tools/train.py``'s ``main`` on CPU in two processes with different
``PYTHONHASHSEED`` (so set/dict-order dependence would show), and every
logged value but the timings must be bit-identical. Each process trains the
five configs one after the other (two interpreters instead of ten; both run
the same sequence, so what one run leaves in the process is the same in
both).
"""
import json
import os
import subprocess
import sys

import pytest

from conftest import PRETRAIN_MINI_CONFIGS, REPO, read_scalars

NUM_ITERS = 3
ALGOS = sorted(PRETRAIN_MINI_CONFIGS)
# tools/train.py's main once per command line of argv[1] (a JSON list)
TRAIN_EACH = '''
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location('train', 'tools/train.py')
train = importlib.util.module_from_spec(spec)
spec.loader.exec_module(train)
for argv in json.loads(sys.argv[1]):
    train.main(argv)
'''


def train_argv(config, work_dir, mini_data):
    return [
        config, '--work-dir', str(work_dir), '--cfg-options',
        f'train_dataloader.dataset.data_root={mini_data}/unlabeled/',
        f'train_cfg.max_iters={NUM_ITERS}', 'default_hooks.logger.interval=1',
        'randomness.seed=0', 'randomness.deterministic=True'
    ]


@pytest.fixture(scope='module')
def logged(tmp_path_factory, mini_data):
    """``{algo: (values of process 1, values of process 2)}``: every logged
    record without its timings."""
    root = tmp_path_factory.mktemp('determinism')
    procs = []
    for hash_seed in (1, 2):
        argvs = [train_argv(PRETRAIN_MINI_CONFIGS[algo],
                            root / str(hash_seed) / algo, mini_data)
                 for algo in ALGOS]
        procs.append(subprocess.Popen(
            [sys.executable, '-c', TRAIN_EACH, json.dumps(argvs)], cwd=REPO,
            env={**os.environ, 'OMP_NUM_THREADS': '1',
                 'PYTHONHASHSEED': str(hash_seed)},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=1800)
            assert proc.returncode == 0, out[-4000:]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()

    def values(work_dir):
        return [{k: v for k, v in r.items() if 'time' not in k}
                for r in read_scalars(work_dir)]

    return {algo: tuple(values(root / str(seed) / algo) for seed in (1, 2))
            for algo in ALGOS}


@pytest.mark.slow
@pytest.mark.parametrize('algo', ALGOS)
def test_same_seed_same_losses(logged, algo):
    first, second = logged[algo]
    assert [r['iter'] for r in first] == list(range(1, NUM_ITERS + 1))
    assert all(any(k.startswith('loss') for k in r) for r in first)
    assert first == second
