"""The online depth and retrieval probes: they log their metrics, restore
every random generator, and leave a pretraining run's losses exactly as
they are without them."""
import random
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.runner import Runner

from conftest import read_scalars
from mmpos.engine.hooks import OnlineDepthProbeHook, OnlineRetrievalProbeHook
from mmpos.engine.hooks.rng_state import get_rng_state

DEMO = 'configs/dense_probes/droppos_vit-tiny-rope-mixed_mini_online-dense-probes.py'  # noqa: E501


def hooks(interval):
    """The config's two hooks, pointed at the test data."""
    cfg = Config.fromfile(DEMO)
    out = [dict(h, interval=interval, img_size=32) for h in cfg.custom_hooks
           if h['type'] != 'DropPosSigmaHook']
    out[0].update(iters=20, n_bins=16)
    return out


def fake_runner(model, root):
    logs = []
    runner = SimpleNamespace(
        model=model, iter=0,
        cfg=Config(dict(train_dataloader=dict(dataset=dict(
            data_root=f'{root}/unlabeled/')))),
        logger=SimpleNamespace(info=logs.append),
        message_hub=SimpleNamespace(update_scalar=lambda k, v: logs.append(
            (k, v))))
    return runner, logs


def test_probes_log_and_restore_every_generator(dense_mini, monkeypatch):
    import mmpos.evaluation.dense as dense
    from mmpos.registry import MODELS
    model = MODELS.build(Config.fromfile(DEMO).model)
    real = dense.dense_features

    def drawing(*args, **kwargs):  # a probe that draws from every generator
        random.random(), np.random.rand(), torch.rand(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(dense, 'dense_features', drawing)
    runner, logs = fake_runner(model, dense_mini)
    for cfg, keys in zip(hooks(1), ({'depth_rmse', 'depth_abs_rel',
                                     'depth_d1'}, {'retrieval_miou'})):
        cfg = dict(cfg)
        hook = {'OnlineDepthProbeHook': OnlineDepthProbeHook,
                'OnlineRetrievalProbeHook': OnlineRetrievalProbeHook}[
                    cfg.pop('type')](**cfg)
        hook.before_train(runner)
        torch.manual_seed(0)
        before = get_rng_state()
        results = hook.probe(runner)
        after = get_rng_state()
        assert set(results) == keys
        assert all((f'train/{k}', v) in logs for k, v in results.items())
        assert before['python'] == after['python']
        assert torch.equal(before['torch'], after['torch'])
        assert torch.equal(before['numpy']['key'], after['numpy']['key'])
        assert before['numpy']['pos'] == after['numpy']['pos']
    assert 0 <= results['retrieval_miou'] <= 100


@pytest.mark.slow
def test_probes_leave_training_exact(dense_mini, mini_data, tmp_path):
    """DropPos for 4 iterations with the probes after iterations 2 and 4
    logs the same losses as without them."""
    import shutil
    for name in ('nyu', 'stuff'):  # beside the pretraining images
        shutil.copytree(dense_mini / name, tmp_path / 'data' / name)
    shutil.copytree(mini_data / 'unlabeled', tmp_path / 'data' / 'unlabeled')
    records = {}
    for probed in (False, True):
        cfg = Config.fromfile(DEMO)
        cfg.work_dir = str(tmp_path / str(probed))
        cfg.train_dataloader.dataset.data_root = f'{tmp_path}/data/unlabeled/'
        cfg.train_dataloader.batch_size = 4
        cfg.train_cfg.max_iters = 4
        cfg.default_hooks.logger.interval = 1
        cfg.default_hooks.online_probe.interval = 0
        cfg.default_hooks.health_monitor.interval = 0
        cfg.default_hooks.checkpoint.interval = 4
        cfg.randomness = dict(seed=0, deterministic=True)
        cfg.custom_hooks = cfg.custom_hooks[:1] + (hooks(2) if probed else [])
        Runner.from_cfg(cfg).train()
        records[probed] = {r['iter']: r for r in read_scalars(cfg.work_dir)}
    assert 'depth_rmse' in records[True][2]
    assert 'retrieval_miou' in records[True][4]
    for i, plain in records[False].items():
        assert {k: v for k, v in records[True][i].items() if k in plain and
                'time' not in k} == {k: v for k, v in plain.items()
                                     if 'time' not in k}


@pytest.mark.parametrize('index', [0, 1], ids=['depth', 'retrieval'])
def test_a_missing_probe_set_switches_the_probe_off(tmp_path, index):
    """On a user's own images (no ../nyu or ../stuff beside them) the
    shipped probe logs one warning naming the path and how to switch it
    off, and trains on without it (a monitor never blocks)."""
    from mmpos.registry import HOOKS
    hook = HOOKS.build(hooks(interval=5)[index])
    model = SimpleNamespace(  # what input_settings reads
        backbone=SimpleNamespace(img_size=32),
        data_preprocessor=SimpleNamespace(mean=torch.zeros(3),
                                          std=torch.ones(3)))
    runner, logs = fake_runner(model, tmp_path)
    runner.logger.warning = logs.append
    hook.before_train(runner)
    assert hook.interval == 0 and len(logs) == 1
    missing = tmp_path / ('nyu' if index == 0 else 'stuff')
    assert f'set not found: {missing}' in logs[0]
    assert logs[0].endswith(f'the online {hook.name} is off for this run '
                            '(switch it off to silence this: interval=0 in '
                            'its hook config)')
    hook.after_train_iter(runner, 0)  # nothing to measure, nothing run


def test_probes_on_naflex_maps_of_a_naflex_pretraining(dense_mini):
    """With max_tokens, the probes of a NaFlex pretraining's backbone run
    on NaFlex maps: on the square mini data at the square size (32 px, 16
    patches of 8) they log what the square probes log; a backbone without
    NaFlex maps is refused in one line before training."""
    from mmpos.errors import UnsupportedModelError
    from mmpos.registry import HOOKS, MODELS
    torch.manual_seed(0)
    model = MODELS.build(Config.fromfile(
        'configs/naflex/mae_vit-tiny-naflex_mini.py').model)
    runner, logs = fake_runner(model, dense_mini)
    for cfg in hooks(1):
        results = []
        for extra in ({}, dict(max_tokens=16)):
            hook = HOOKS.build(dict(cfg, **extra))
            hook.before_train(runner)
            results.append(hook.probe(runner))
        assert isinstance(hook._data['val'][1], list)
        assert results[1] == pytest.approx(results[0], rel=1e-4, abs=1e-4)
    assert any('at their aspect ratios within 16 patches' in str(line)
               for line in logs)
    model.backbone.out_type = 'featmap'
    with pytest.raises(UnsupportedModelError, match=r"OnlineDepthProbeHook "
                       r"max_tokens=16: .*out_type='raw'"):
        HOOKS.build(dict(hooks(1)[0], max_tokens=16)).before_train(runner)
