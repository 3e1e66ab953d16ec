"""Monitors observe, never block (issue 38): a pretraining config pointed at
a plain folder of images, without the probe set its online kNN probe and
collapse monitor derive from the training data root, trains with one
warning per monitor (the missing path, how to write the set, how to switch
the monitor off) and a ``health.json`` that says the monitor was off; a
probe set that exists but cannot be read is still an error. Statistics
from before they were centred (issue 33) are never judged: an old
``health.json`` is refused, an old checkpoint's monitor state switches the
monitor off the same way."""
import importlib.util
import json
import os
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from mmengine.config import Config
from PIL import Image

from conftest import REPO
from mmpos.engine.hooks import HealthMonitorHook, OnlineProbeHook
from mmpos.engine.hooks.health_monitor import read_health
from mmpos.engine.hooks.online_probe import ProbeSetMissing

DEMO = 'configs/demo/droppos_vit-tiny-rope-mixed_mini.py'
CLS_SET = dict(type='CustomDataset', data_root='{train_data_root}/../cls')
MAKE = 'python tools/misc/make_mini_data.py data/mini --which cls'


def train_tool():
    """tools/train.py as a module: its ``main`` runs in this process."""
    spec = importlib.util.spec_from_file_location('health_train_tool',
                                                  REPO / 'tools/train.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pretraining_on_plain_image_folder(tmp_path, capsys):
    """tools/train.py's ``main`` in this process (the command line's exit
    codes and one-line errors are tested in tests/tools/), 2 iterations:
    both monitors of the demo config warn once and the run trains on."""
    images = tmp_path / 'my_images'
    images.mkdir()
    rng = np.random.default_rng(0)
    for i in range(16):
        Image.fromarray(rng.integers(0, 256, (64, 64, 3), np.uint8)).save(
            images / f'{i:02d}.jpg')
    work_dir = tmp_path / 'work'
    train_tool().main([
        DEMO, '--work-dir', str(work_dir), '--cfg-options',
        f'train_dataloader.dataset.data_root={images}/',
        'train_dataloader.batch_size=8', 'train_cfg.max_iters=2',
        'default_hooks.checkpoint.interval=2'])
    captured = capsys.readouterr()
    output = captured.out + captured.err
    assert 'Traceback' not in output
    assert (work_dir / 'iter_2.pth').is_file()
    assert (work_dir / 'last_checkpoint').read_text().strip().endswith(
        'iter_2.pth')
    missing = tmp_path / 'cls'
    log = next(work_dir.glob('*/*.log')).read_text()
    for text in (output, log):
        warnings = [line for line in text.splitlines()
                    if ' - WARNING - ' in line and str(missing) in line]
        assert [w.split(' - WARNING - ')[1] for w in warnings] == [
            f'OnlineProbeHook: kNN train set not found: {missing} (mini '
            f'configs: {MAKE}); the online kNN probe is off for this run '
            '(switch it off to silence this: --cfg-options '
            'default_hooks.online_probe.interval=0)',
            f'HealthMonitorHook: probe set not found: {missing} (mini '
            f'configs: {MAKE}); the collapse monitor is off for this run '
            '(switch it off to silence this: --cfg-options '
            'default_hooks.health_monitor.interval=0)']
    # not measured is not healthy: the method ranking must be able to tell
    health = read_health(str(work_dir / 'health.json'))
    assert health['collapsed'] is None and health['final'] is None
    assert health['disabled'] == (f'HealthMonitorHook: probe set not '
                                  f'found: {missing} (mini configs: {MAKE})')
    assert not [f for f in os.listdir(work_dir) if f.endswith('.part')]


def fake_runner(tmp_path, train_root):
    """What the monitors' ``before_train`` reads of a runner: a model with
    a 32 px backbone and a normalising data preprocessor, the training
    data root, a logger and the work dir."""
    logs = []
    model = SimpleNamespace(
        backbone=SimpleNamespace(img_size=32),
        data_preprocessor=SimpleNamespace(mean=torch.zeros(3),
                                          std=torch.ones(3)))
    return SimpleNamespace(
        model=model, work_dir=str(tmp_path), logs=logs,
        cfg=Config(dict(train_dataloader=dict(dataset=dict(
            data_root=str(train_root))))),
        logger=SimpleNamespace(info=logs.append, warning=logs.append))


def monitors():
    return [OnlineProbeHook(dict(CLS_SET, data_prefix='train'),
                            dict(CLS_SET, data_prefix='val'), interval=2),
            HealthMonitorHook(dict(CLS_SET, data_prefix='val'), interval=2)]


@pytest.mark.parametrize('hook', monitors(), ids=lambda h: type(h).__name__)
def test_missing_probe_set_outside_default_hooks(tmp_path, hook):
    """A monitor in ``custom_hooks`` names its own ``interval`` instead of
    a ``default_hooks`` key, and is off afterwards."""
    runner = fake_runner(tmp_path, tmp_path / 'images')
    hook.before_train(runner)
    assert len(runner.logs) == 1
    assert runner.logs[0].endswith(
        'is off for this run (switch it off to silence this: interval=0 '
        'in its hook config)')
    assert hook.interval == 0
    hook.after_train_iter(runner, 0)  # nothing to measure, nothing run


@pytest.mark.parametrize('hook', monitors(), ids=lambda h: type(h).__name__)
def test_broken_probe_set_is_an_error(tmp_path, hook):
    """A probe set that exists but has no split folders: raised, not
    taken for a missing one; nothing logged or written."""
    (tmp_path / 'cls').mkdir()
    runner = fake_runner(tmp_path, tmp_path / 'images')
    with pytest.raises(FileNotFoundError, match='cls/(train|val)') as error:
        hook.before_train(runner)
    assert not isinstance(error.value, ProbeSetMissing)
    assert runner.logs == [] and hook.interval == 2
    assert not (tmp_path / 'health.json').exists()


OLD_STATE = dict(initial=dict(cos_within=0.9, cos_across=0.9, eff_rank=9.),
                 history=[dict(iter=2, cos_within=0.9, cos_across=0.9,
                               eff_rank=8.)])


def test_health_file_from_before_centring_is_refused(tmp_path):
    """A health.json without ``"centred": true`` holds statistics of raw
    tokens: refused with one line naming the file, not judged."""
    path = tmp_path / 'health.json'
    path.write_text(json.dumps(dict(OLD_STATE, final=OLD_STATE['initial'],
                                    num_prototypes=None, collapsed=False,
                                    reasons=[], disabled=None)))
    with pytest.raises(ValueError) as error:
        read_health(str(path))
    assert str(error.value) == (
        f'{path}: written before the collapse statistics were centred (no '
        '"centred": true); its numbers cannot be judged by the current '
        'rule: re-run the pretraining with HealthMonitorHook')


def test_resumed_state_from_before_centring_switches_the_monitor_off(
        tmp_path):
    """A checkpoint whose monitor state is from before the centring has
    no usable starting numbers: the monitor warns once, is off, and its
    health.json says why; a state saved now is marked and resumed."""
    runner = fake_runner(tmp_path, tmp_path / 'images')
    hook = HealthMonitorHook(dict(CLS_SET, data_prefix='val'), interval=2)
    hook.after_load_checkpoint(runner, dict(health_monitor=OLD_STATE))
    hook.before_train(runner)
    why = ("HealthMonitorHook: the resumed checkpoint holds the starting "
           "weights' health of raw tokens, from before the statistics were "
           "centred; without their centred numbers there is no verdict")
    assert runner.logs == [
        f'{why}; the collapse monitor is off for this run (switch it off to '
        'silence this: interval=0 in its hook config)']
    assert hook.interval == 0
    assert read_health(str(tmp_path / 'health.json')) == dict(
        centred=True, initial=None, history=[], final=None,
        num_prototypes=None, collapsed=None, reasons=[], disabled=why)
    checkpoint = {}
    hook.initial = dict(spread=0.9, eff_rank=20., cos_within=0.1,
                        cos_across=0.)
    hook.before_save_checkpoint(runner, checkpoint)
    resumed = HealthMonitorHook(dict(CLS_SET, data_prefix='val'))
    resumed.after_load_checkpoint(runner, checkpoint)
    assert resumed.initial == hook.initial and resumed.stale is None
