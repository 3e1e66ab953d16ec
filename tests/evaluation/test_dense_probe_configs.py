"""The dense-probe configs (model-free: data + protocol settings, left out
of tests/test_configs.py) load, name only known settings and carry the
protocols' hyper-parameters."""
from pathlib import Path

import pytest
from mmengine.config import Config

from conftest import REPO
from mmpos.evaluation.correspondence import CORRESPONDENCE_PROBE
from mmpos.evaluation.dense import probe_settings
from mmpos.evaluation.dense_retrieval import RETRIEVAL_PROBE
from mmpos.evaluation.depth_probe import DEPTH_PROBE

PROBES = dict(depth=('depth_probe', DEPTH_PROBE),
              correspondence=('correspondence_probe', CORRESPONDENCE_PROBE),
              retrieval=('retrieval_probe', RETRIEVAL_PROBE))
CONFIGS = sorted(p for p in (REPO / 'configs/dense_probes').glob('*.py')
                 if p.name.split('_')[0] in PROBES)


@pytest.mark.parametrize('path', CONFIGS, ids=lambda p: Path(p).name)
def test_probe_config_settings(path):
    cfg = Config.fromfile(path)
    key, defaults = PROBES[path.name.split('_')[0]]
    settings = probe_settings(cfg, key, defaults)
    if key == 'depth_probe':  # DINOv2's linear depth head on NYU
        assert (settings['n_bins'], settings['bins_strategy'],
                settings['norm_strategy'], settings['upsample'],
                settings['min_depth'], settings['max_depth'],
                settings['cls_token']) == (256, 'UD', 'linear', 4, 1e-3,
                                           10., True)
        assert cfg.val_evaluator.type == 'mmpretrain.DinoDepthMetric'
        assert cfg.train_dataloader.dataset.type == 'NYUDataset'
    elif key == 'retrieval_probe':  # Open Hummingbird
        assert (settings['k'], settings['temperature']) == (30, 0.02)
        assert cfg.val_evaluator.type == 'IoUMetric'
    else:  # SPair-71k PCK
        assert settings['alphas'] == (0.05, 0.1) and settings['by'] == 'bbox'
    if 'mini' not in path.name:
        assert not cfg.get('data_root', 'data/').startswith('data/mini')
