"""mmpos.guardrails.launch: config loading, safe image loading, the work
dir's lock, resume, the console."""
import os
import signal
import socket
import subprocess
import sys

import pytest
import torch

from conftest import REPO
from mmpos.datasets.robust_loading import SafeLoadImageFromFile
from mmpos.errors import LaunchError
from mmpos.guardrails.launch import (load_config, lost_rank, quiet_console,
                                     resume_checkpoint,
                                     use_safe_image_loading, work_dir_lock)

SEG_CONFIG = 'configs/demo/upernet_vit-tiny-rope-mixed_mini-ade.py'


def truncated(path, obj):
    torch.save(obj, path)
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])  # a save cut short
    return path


def test_tools_load_images_safely_in_every_scope():
    from mmengine.registry import TRANSFORMS
    cfg = load_config(SEG_CONFIG)
    assert use_safe_image_loading(cfg, 'skip') == 3
    train_load = cfg.train_dataloader.dataset.pipeline[0]
    assert train_load.type == 'mmpretrain.SafeLoadImageFromFile'
    assert train_load.on_error == 'skip'
    for split in ('val', 'test'):  # test-mode datasets cannot skip
        assert cfg[f'{split}_dataloader'].dataset.pipeline[0].on_error == \
            'raise'
    with TRANSFORMS.switch_scope_and_registry('mmseg') as registry:
        assert isinstance(registry.build(train_load), SafeLoadImageFromFile)


def test_none_switches_off_mmpos_default_hooks():
    """``default_hooks.check_loss=None`` removes mmpos' hook (mmengine 0.10
    would fail on it), while ``None`` for mmengine's own hooks is kept for
    mmengine to honour."""
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


def test_a_killed_run_leaves_no_stuck_lock(tmp_path):
    """A run holding the lock refuses a second one; SIGKILLed, it leaves
    the lock file behind, and the next run takes it."""
    work_dir = tmp_path / 'run'
    holder = subprocess.Popen(
        [sys.executable, '-c',
         'import sys, time\n'
         'from mmpos.guardrails.launch import work_dir_lock\n'
         f'with work_dir_lock({str(work_dir)!r}):\n'
         '    print("locked", flush=True)\n'
         '    time.sleep(600)\n'],
        cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == 'locked'
        with pytest.raises(Exception, match=rf'work dir {work_dir} is in use '
                           rf'by another run \(pid {holder.pid} on '):
            with work_dir_lock(str(work_dir)):
                pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert (work_dir / '.mmpos_run.lock').is_file()  # stale, not held
    with work_dir_lock(str(work_dir)) as existed:
        assert existed
        assert f'pid {os.getpid()} on' in (work_dir /
                                           '.mmpos_run.lock').read_text()
    assert os.listdir(work_dir) == []


def test_resume_points_to_the_newest_intact_checkpoint(tmp_path):
    """``last_checkpoint`` naming a truncated file or left empty."""
    for i in (2, 4):
        torch.save({'i': i}, tmp_path / f'iter_{i}.pth')
    truncated(tmp_path / 'iter_6.pth', {'w': torch.rand(64, 64)})
    marker = tmp_path / 'last_checkpoint'
    marker.write_text(str(tmp_path / 'iter_6.pth'))
    with pytest.raises(LaunchError,
                       match=rf'newest intact one is {tmp_path}/iter_4.pth'):
        resume_checkpoint(str(tmp_path))
    marker.write_text('')  # killed while writing the marker itself
    with pytest.raises(LaunchError, match=rf'{marker} is empty\); the newest '
                       rf'intact one is {tmp_path}/iter_4.pth'):
        resume_checkpoint(str(tmp_path))


def test_lost_rank_waits_for_a_peer_that_is_still_exiting(monkeypatch):
    """A collective can fail on ``Connection reset by peer`` while the
    killed peer is still exiting: ``lost_rank`` names it once it has ended
    (within its grace), and without the grace gives ``None`` (another
    failure) while the peer still runs."""
    monkeypatch.setenv('RANK', '0')
    host = socket.gethostname()
    peer = subprocess.Popen([sys.executable, '-c',
                             'import time; time.sleep(1)'])
    try:
        processes = [(host, os.getpid()), (host, peer.pid)]
        err = RuntimeError('[../gloo/transport/tcp/pair.cc:534] Read error '
                           '[127.0.0.1]:5000: Connection reset by peer')
        assert lost_rank(err, processes, grace=0) is None
        assert lost_rank(err, processes, grace=30) == (
            f'rank 0 of 2 stopped: rank 1 (pid {peer.pid} on {host}) has '
            'ended, and the job cannot go on without it (Read error '
            '[127.0.0.1]:5000: Connection reset by peer)')
        assert lost_rank(ValueError(str(err)), processes) is None
        assert lost_rank(err, [(host, os.getpid()), ('elsewhere', 1)]) == (
            'rank 0 of 2 stopped: a rank on another host ended, and the job '
            'cannot go on without it (Read error [127.0.0.1]:5000: '
            'Connection reset by peer)')
    finally:
        peer.kill()
        peer.wait()
