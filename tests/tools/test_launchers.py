"""tools/train.py, tools/test.py and tools/dist_train.sh on CPU."""
import os
import sys

import pytest
import torch

from conftest import REPO, data_root_options, free_port, run_tool

SEG_CONFIG = 'configs/demo/upernet_vit-tiny-rope-mixed_mini-ade.py'


def test_train_missing_config_is_one_line_error(tmp_path):
    result = run_tool('tools/train.py', tmp_path / 'nope.py')
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [
        f'train.py: error: config file not found: {tmp_path / "nope.py"}'
    ]


def test_train_refuses_to_overwrite_checkpoints(tmp_path):
    work_dir = tmp_path / 'run'
    work_dir.mkdir()
    (work_dir / 'last_checkpoint').write_text(str(work_dir / 'iter_8.pth'))
    (work_dir / 'iter_8.pth').write_bytes(b'user data')
    result = run_tool('tools/train.py', SEG_CONFIG, '--work-dir', work_dir)
    assert result.returncode != 0
    assert 'already holds checkpoints' in result.stderr
    assert '--resume' in result.stderr
    assert (work_dir / 'iter_8.pth').read_bytes() == b'user data'


def test_resume_checkpoint_must_exist(tmp_path):
    result = run_tool('tools/train.py', SEG_CONFIG, '--resume',
                      tmp_path / 'missing.pth')
    assert result.returncode != 0
    assert 'checkpoint not found' in result.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason='CPU-only behaviour')
def test_amp_needs_cuda(tmp_path):
    result = run_tool('tools/train.py', SEG_CONFIG, '--amp', '--work-dir',
                      tmp_path / 'run')
    assert result.returncode != 0
    assert '--amp needs a CUDA device' in result.stderr


def test_test_missing_checkpoint(tmp_path):
    result = run_tool('tools/test.py', SEG_CONFIG, tmp_path / 'missing.pth')
    assert result.returncode != 0
    assert 'checkpoint not found' in result.stderr


def test_dist_train_two_processes_on_cpu(tmp_path, mini_data):
    """dist_train.sh starts 2 gloo processes; training steps and saves."""
    import subprocess
    work_dir = tmp_path / 'dist'
    options = data_root_options(mini_data, 'ade') + [
        'train_cfg.max_iters=4', 'train_cfg.val_interval=100',
        'default_hooks.checkpoint.interval=4', 'default_hooks.logger.interval=1'
    ]
    env = {**os.environ, 'PYTHON': sys.executable, 'PORT': str(free_port()),
           'OMP_NUM_THREADS': '1'}
    result = subprocess.run(
        ['bash', 'tools/dist_train.sh', SEG_CONFIG, '2', '--work-dir',
         str(work_dir), '--cfg-options', *options],
        cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert (work_dir / 'iter_4.pth').is_file()
    logs = list(work_dir.glob('*/*.log'))
    assert logs, 'rank 0 wrote no log'
    log = logs[0].read_text()
    assert 'Distributed launcher: pytorch' in log
    assert 'Distributed training: True' in log
    assert 'GPU number: 2' in log  # mmengine's name for the world size
    assert "'backend': 'gloo'" in log


def test_dist_run_uses_the_repository_venv(tmp_path):
    """Without PYTHON and without an activated venv (a PATH whose python
    has no torch), dist_run.sh runs the repository's .venv/bin/python."""
    import shutil
    import subprocess
    (tmp_path / 'tools').mkdir()
    shutil.copy(REPO / 'tools/dist_run.sh', tmp_path / 'tools')
    (tmp_path / 'tools/probe.py').write_text(
        'import os, torch\nprint("ran", os.environ["VENV_PYTHON"])\n')
    (tmp_path / '.venv/bin').mkdir(parents=True)
    venv_python = tmp_path / '.venv/bin/python'  # stands for the venv's
    venv_python.write_text(f'#!/bin/sh\nVENV_PYTHON="$0" exec '
                           f'{sys.executable} "$@"\n')
    venv_python.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != 'PYTHON'}
    env.update(PATH='/usr/bin:/bin', PORT=str(free_port()))
    result = subprocess.run(
        ['bash', str(tmp_path / 'tools/dist_run.sh'), 'probe.py', '1'],
        capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f'ran {tmp_path}/.venv/bin/python' in result.stdout


