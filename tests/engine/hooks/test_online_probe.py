"""OnlineProbeHook (issue 16): the kNN probe during pretraining logs its
accuracy and leaves training exactly as it is, in a fresh and in a resumed
run; it probes the EMA teacher where there is one."""
import json
import random
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.runner import Runner

from conftest import read_scalars
from mmpos.checkpoint import use_safe_io
from mmpos.engine.hooks import OnlineProbeHook
from mmpos.engine.hooks.online_probe import probe_backbone
from mmpos.engine.hooks.rng_state import get_rng_state

DROPPOS = 'configs/droppos/droppos_vit-tiny_mini.py'
DINOV2 = 'configs/dinov2/dinov2_vit-tiny_mini.py'
MAX_ITERS = 6


def droppos_cfg(work_dir, mini_data, probe=True, resume_from=None):
    cfg = Config.fromfile(DROPPOS)
    cfg.work_dir = str(work_dir)
    cfg.experiment_name = f'{work_dir.name}_{resume_from is not None}'
    cfg.train_dataloader.dataset.data_root = f'{mini_data}/unlabeled/'
    cfg.train_dataloader.batch_size = 8
    cfg.train_cfg.max_iters = MAX_ITERS
    cfg.default_hooks.checkpoint.interval = 3
    cfg.default_hooks.logger.interval = 1
    cfg.randomness = dict(seed=0, deterministic=True)
    cfg.default_hooks.online_probe.interval = 2 if probe else 0
    if resume_from:
        cfg.resume, cfg.load_from = True, str(resume_from)
    return cfg


def train_records(cfg):
    use_safe_io()  # as tools/train.py: mmengine checkpoints resume
    Runner.from_cfg(cfg).train()
    return {r['iter']: {k: v for k, v in r.items() if 'time' not in k}
            for r in read_scalars(cfg.work_dir)}


def without_probe(records):
    return {i: {k: v for k, v in r.items() if not k.startswith('knn_')}
            for i, r in records.items()}


@pytest.mark.slow
def test_probe_leaves_training_and_resume_bit_exact(tmp_path, mini_data):
    plain = train_records(droppos_cfg(tmp_path / 'plain', mini_data, False))
    probed = train_records(droppos_cfg(tmp_path / 'probed', mini_data))
    assert sorted(plain) == list(range(1, MAX_ITERS + 1))
    # probes after iterations 2, 4, 6 and nothing else differs
    assert [i for i, r in probed.items() if 'knn_cls_top1' in r] == \
        [2, 3, 4, 5, 6]  # logged from the first probe on
    assert all(0 <= probed[6][k] <= 100
               for k in ('knn_cls_top1', 'knn_avg_top1'))
    assert without_probe(probed) == plain
    # the collapse monitor (on in both) measured after the last iteration
    health = json.loads((tmp_path / 'probed/health.json').read_text())
    assert health['disabled'] is None and health['history'][-1]['iter'] == 6
    assert isinstance(health['collapsed'], bool)
    # killed after the checkpoint of iteration 3, resumed: the same log
    resumed_dir = tmp_path / 'resumed'
    resumed = train_records(droppos_cfg(
        resumed_dir, mini_data, resume_from=tmp_path / 'probed/iter_3.pth'))
    assert resumed == {i: r for i, r in probed.items() if i > 3}


class DrawingBatchFeatures:
    """Stands in for ``batch_features`` and draws from every generator."""

    def __init__(self, real):
        self.real = real

    def __call__(self, *args, **kwargs):
        random.random(), np.random.rand(), torch.rand(1)
        return self.real(*args, **kwargs)


def test_probe_restores_every_generator(monkeypatch, mini_data):
    import mmpos.evaluation.frozen as frozen
    from mmpos.registry import MODELS
    from mmengine.registry import DefaultScope

    from mmpos.apis import load_config
    cfg = load_config(DROPPOS)  # its custom_imports (DropPos) imported
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        model = MODELS.build(cfg.model)
    cls_set = dict(type='CustomDataset', data_root='{train_data_root}/../cls')
    hook = OnlineProbeHook(dict(cls_set, data_prefix='train'),
                           dict(cls_set, data_prefix='val'), interval=1)
    logs = []
    runner = SimpleNamespace(
        model=model, iter=0,
        cfg=Config(dict(train_dataloader=dict(dataset=dict(
            data_root=f'{mini_data}/unlabeled/')))),
        logger=SimpleNamespace(info=logs.append),
        message_hub=SimpleNamespace(update_scalar=lambda k, v: logs.append(
            (k, v))))
    hook.before_train(runner)
    monkeypatch.setattr(frozen, 'batch_features',
                        DrawingBatchFeatures(frozen.batch_features))
    torch.manual_seed(0)
    before = get_rng_state()
    results = hook.probe(runner)
    after = get_rng_state()
    assert set(results) == {'knn_cls_top1', 'knn_avg_top1'}
    assert ('train/knn_cls_top1', results['knn_cls_top1']) in logs
    assert before['python'] == after['python']
    assert torch.equal(before['torch'], after['torch'])
    assert torch.equal(before['numpy']['key'], after['numpy']['key'])
    assert before['numpy']['pos'] == after['numpy']['pos']


def test_probe_uses_ema_teacher():
    from mmpos.registry import MODELS
    from mmengine.registry import init_default_scope
    init_default_scope('mmpretrain')
    dino = MODELS.build(Config.fromfile(DINOV2).model)
    backbone, which = probe_backbone(dino)
    assert which == 'teacher' and backbone is dino.teacher.module['backbone']
    assert backbone is not dino.backbone
    droppos = MODELS.build(Config.fromfile(DROPPOS).model)
    assert probe_backbone(droppos) == (droppos.backbone, 'student')
