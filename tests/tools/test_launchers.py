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


def test_none_switches_off_mmpos_default_hooks():
    """``default_hooks.check_loss=None`` removes mmpos' hook (mmengine 0.10
    would fail on it), while ``None`` for mmengine's own hooks is kept for
    mmengine to honour."""
    from mmpos.guardrails.launch import load_config
    cfg = load_config('configs/droppos/droppos_vit-tiny_mini.py', {
        'default_hooks.check_loss': None,
        'default_hooks.rng_state': None,
        'default_hooks.timer': None
    })
    assert 'check_loss' not in cfg.default_hooks
    assert 'rng_state' not in cfg.default_hooks
    assert cfg.default_hooks.timer is None
    assert cfg.default_hooks.checkpoint.type == 'IntactCheckpointHook'


def test_per_parameter_lines_stay_off_the_console(tmp_path, capsys):
    """mmengine logs a line per parameter while it builds the optimizer
    (parameter-wise options, skipped frozen parameters); after
    quiet_console they are in the run's log file only, and other records
    reach both."""
    import torch.nn as nn
    from mmengine.logging import MMLogger, print_log
    from mmengine.optim import build_optim_wrapper

    from mmpos.guardrails.launch import quiet_console
    log = tmp_path / 'run.log'
    logger = MMLogger.get_instance('per_parameter_test', log_file=str(log),
                                   log_level='INFO')
    quiet_console(logger)
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    model[0].requires_grad_(False)
    build_optim_wrapper(model, dict(optimizer=dict(type='SGD', lr=0.1,
                                                   weight_decay=0.01),
                                    paramwise_cfg=dict(bias_decay_mult=0.)))
    print_log('another warning', logger='current', level=30)
    console, text = capsys.readouterr().out, log.read_text()
    assert 'requires_grad=False' in text and 'paramwise_options' in text
    assert 'requires_grad=False' not in console
    assert 'paramwise_options' not in console
    assert 'another warning' in text and 'another warning' in console


def test_resume_and_auto_resume(tmp_path):
    """--resume on a work dir without checkpoint stops; --auto-resume starts
    fresh there and resumes the newest checkpoint where there is one."""
    import importlib.util

    from mmpos.guardrails.launch import LaunchError, load_config
    spec = importlib.util.spec_from_file_location('train_tool',
                                                  REPO / 'tools/train.py')
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)

    def merged(*options):
        args = train.parse_args([SEG_CONFIG, '--work-dir', str(tmp_path),
                                 '--skip-data-check', *options])
        return train.merge_args(load_config(SEG_CONFIG), args)

    with pytest.raises(LaunchError, match=f'nothing to resume in {tmp_path}'):
        merged('--resume')
    cfg = merged('--auto-resume')
    assert not cfg.resume and cfg.load_from is None
    torch.save({'state_dict': {}}, tmp_path / 'iter_2.pth')
    (tmp_path / 'last_checkpoint').write_text(str(tmp_path / 'iter_2.pth'))
    for option in ('--resume', '--auto-resume'):
        cfg = merged(option)
        assert cfg.resume and cfg.load_from == str(tmp_path / 'iter_2.pth')
