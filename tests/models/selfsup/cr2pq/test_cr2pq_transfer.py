"""CR2PQ end to end on the mini data through tools/train.py: the mini
pretraining run (once per module) must lower the patch loss without
collapsing; its student backbone, extracted by
tools/model_converters/mmpos2backbone.py, must transfer through the Mask
R-CNN, Cascade Mask R-CNN and UperNet configs of configs/cr2pq/mini_transfer/
(the pretrained tensors are in the backbone after init, a short fine-tuning
runs and the real COCO / mmseg evaluators report metrics)."""
import math

import pytest
import torch

from conftest import data_root_options, finetune, read_scalars, run_tool

MINI = 'configs/cr2pq/cr2pq_vit-tiny_mini.py'
TRANSFER = 'configs/cr2pq/mini_transfer/'
DOWNSTREAM = {
    'mask-rcnn_cr2pq-vit-tiny_mini-coco.py':
    ('coco', ('coco/bbox_mAP', 'coco/bbox_mAP_50', 'coco/segm_mAP')),
    'cascade-mask-rcnn_cr2pq-vit-tiny_mini-coco.py':
    ('coco', ('coco/bbox_mAP', 'coco/bbox_mAP_50', 'coco/segm_mAP')),
    'upernet_cr2pq-vit-tiny_mini-ade.py': ('ade', ('mIoU', 'mAcc', 'aAcc')),
}
FINETUNE_ITERS = 20


@pytest.fixture(autouse=True)
def one_thread_per_run(monkeypatch):
    """Tiny models on a shared 2-core machine: one intra-op thread."""
    monkeypatch.setenv('OMP_NUM_THREADS', '1')


def check_run(result):
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]


@pytest.fixture(scope='module')
def pretraining(tmp_path_factory, mini_data):
    """Work dir of the mini pretraining run (60 iterations)."""
    work_dir = tmp_path_factory.mktemp('cr2pq_mini')
    check_run(run_tool(
        'tools/train.py', MINI, '--work-dir', work_dir, '--cfg-options',
        f'train_dataloader.dataset.data_root={mini_data}/unlabeled/',
        timeout=900, env=dict(OMP_NUM_THREADS='1')))
    return work_dir


@pytest.fixture(scope='module')
def backbone_checkpoint(pretraining):
    """The run's student backbone, extracted and checked (no missing, no
    unexpected key) against the Mask R-CNN transfer config's backbone."""
    dst = pretraining / 'cr2pq_backbone.pth'
    check_run(run_tool(
        'tools/model_converters/mmpos2backbone.py',
        pretraining / 'iter_60.pth', dst, '--config',
        TRANSFER + 'mask-rcnn_cr2pq-vit-tiny_mini-coco.py'))
    return dst


@pytest.mark.slow
def test_mini_run_patch_loss_falls(pretraining):
    patch = [r['loss_patch'] for r in read_scalars(pretraining)
             if 'loss_patch' in r]
    spread = [r['target_std'] for r in read_scalars(pretraining)
              if 'target_std' in r]
    assert len(patch) >= 10 and all(math.isfinite(v) for v in patch)
    # the first window is near the untrained 2 - 2 cos ~ 2; the second half
    # (EMA targets move, so not monotone) must sit well below it
    late = patch[len(patch) // 2:]
    assert sum(late) / len(late) < 0.85 * patch[0], patch
    assert min(spread) > 0.3, spread  # the EMA targets do not collapse


@pytest.mark.slow
def test_converted_checkpoint_is_the_student_backbone(pretraining,
                                                      backbone_checkpoint):
    from mmpos.checkpoint import read_state_dict
    state = read_state_dict(str(pretraining / 'iter_60.pth'))
    student = {k[len('backbone.'):]: v for k, v in state.items()
               if k.startswith('backbone.')}
    converted = torch.load(backbone_checkpoint, map_location='cpu',
                           weights_only=True)['state_dict']
    assert converted.keys() == student.keys()
    assert all(torch.equal(v, converted[k]) for k, v in student.items())
    assert any(k.startswith('target_generator.') for k in state)  # left out


def backbone_after_init(config, checkpoint):
    """``model.backbone`` of ``config`` built and initialised as the Runner
    does, with ``checkpoint``."""
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmpretrain.registry import MODELS

    import mmpos  # noqa: F401
    cfg = Config.fromfile(config)
    init_default_scope('mmpretrain')
    cfg.model.backbone.init_cfg.checkpoint = str(checkpoint)
    backbone = MODELS.build(cfg.model.backbone)
    backbone.init_weights()
    return backbone


@pytest.mark.slow
@pytest.mark.parametrize('config', sorted(DOWNSTREAM))
def test_backbone_transfers(config, backbone_checkpoint, tmp_path,
                            mini_data):
    task, keys = DOWNSTREAM[config]
    pretrained = torch.load(backbone_checkpoint, map_location='cpu',
                            weights_only=True)['state_dict']
    own = backbone_after_init(TRANSFER + config,
                              backbone_checkpoint).state_dict()
    # every tensor pretrained (the multi-level-neck configs have no final
    # LayerNorm ln1, the only checkpoint keys they leave out)
    assert set(own) <= set(pretrained)
    assert set(pretrained) - set(own) <= {'ln1.weight', 'ln1.bias'}
    assert all(torch.equal(own[k], pretrained[k]) for k in own)

    log, losses, metrics = finetune(TRANSFER + config, tmp_path,
                                    backbone_checkpoint,
                                    data_root_options(mini_data, task),
                                    FINETUNE_ITERS)
    assert f'loaded {len(own)} of its {len(own)} tensors' in log
    assert losses[-1] < losses[0], losses  # 5-iteration windows
    for key in keys:
        assert math.isfinite(metrics[key]), (key, metrics)
