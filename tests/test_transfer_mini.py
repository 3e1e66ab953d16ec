"""Real train + val loops through mmengine's Runner (via tools/train.py) on
the mini data: a tiny RoPE ViT with Mask R-CNN on mini-COCO and with UperNet
on mini-ADE. The losses must fall and the real evaluators must report finite
metrics."""
import math

import pytest

from conftest import data_root_options, read_scalars, run_tool

DET_CONFIG = 'configs/demo/mask-rcnn_vit-tiny-rope-mixed_mini-coco.py'
SEG_CONFIG = 'configs/demo/upernet_vit-tiny-rope-mixed_mini-ade.py'


def train(config, work_dir, options, iters):
    result = run_tool(
        'tools/train.py', config, '--work-dir', work_dir, '--cfg-options',
        *options, f'train_cfg.max_iters={iters}',
        f'train_cfg.val_interval={iters}', 'default_hooks.logger.interval=10',
        timeout=1500)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    records = read_scalars(work_dir)
    losses = [r['loss'] for r in records if 'loss' in r]
    metrics = [r for r in records if 'loss' not in r and 'lr' not in r]
    assert len(losses) >= 4, records
    assert metrics, f'no validation record in {records[-3:]}'
    return losses, metrics[-1]


def mean(values):
    return sum(values) / len(values)


@pytest.mark.slow
def test_mask_rcnn_rope_vit_on_mini_coco(tmp_path, mini_data):
    losses, metrics = train(DET_CONFIG, tmp_path / 'det',
                            data_root_options(mini_data, 'coco'), iters=200)
    assert mean(losses[-3:]) < 0.8 * mean(losses[:3]), losses
    for key in ('coco/bbox_mAP', 'coco/bbox_mAP_50', 'coco/bbox_mAP_75',
                'coco/segm_mAP', 'coco/segm_mAP_50'):
        assert math.isfinite(metrics[key]), (key, metrics)
    assert metrics['coco/bbox_mAP_50'] > 0, metrics


@pytest.mark.slow
def test_upernet_rope_vit_on_mini_ade(tmp_path, mini_data):
    losses, metrics = train(SEG_CONFIG, tmp_path / 'seg',
                            data_root_options(mini_data, 'ade'), iters=120)
    assert mean(losses[-3:]) < 0.8 * mean(losses[:3]), losses
    for key in ('mIoU', 'mAcc', 'aAcc'):
        assert math.isfinite(metrics[key]), (key, metrics)
    # Chance level: 1/K of the classes present in mini-ADE (K <= 8).
    assert metrics['mIoU'] > 100 / 8 * 2, metrics
