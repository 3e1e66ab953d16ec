"""CR2PQ end to end on the mini data through tools/train.py: the mini
pretraining run (once per module) must lower the patch loss without
collapsing; its student backbone, extracted by
tools/model_converters/mmpos2backbone.py (its ``main``, in this process),
must transfer through the Mask R-CNN, Cascade Mask R-CNN and UperNet configs
of configs/cr2pq/mini_transfer/: the pretrained tensors are in the backbone
after init, and the whole model fine-tunes in this process for a few steps
on one mini batch with the config's optimizer and warm-up (the loss falls,
the backbone moves) and the real COCO / mmseg evaluators score its
predictions. These configs are the demo detectors and segmentor with
CR2PQ's backbone; their full fine-tuning runs through tools/train.py are
tests/tools/test_transfer_mini.py's and test_transfer_suite.py's."""
import importlib.util
import math

import pytest
import torch

from conftest import (REPO, data_root_options, first_val_metrics,
                      read_scalars, run_tool, runner_steps)

MINI = 'configs/cr2pq/cr2pq_vit-tiny_mini.py'
TRANSFER = 'configs/cr2pq/mini_transfer/'
DOWNSTREAM = {
    'mask-rcnn_cr2pq-vit-tiny_mini-coco.py':
    ('coco', ('coco/bbox_mAP', 'coco/bbox_mAP_50', 'coco/segm_mAP')),
    'cascade-mask-rcnn_cr2pq-vit-tiny_mini-coco.py':
    ('coco', ('coco/bbox_mAP', 'coco/bbox_mAP_50', 'coco/segm_mAP')),
    'upernet_cr2pq-vit-tiny_mini-ade.py': ('ade', ('mIoU', 'mAcc', 'aAcc')),
}
FINETUNE_STEPS = 4


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
    spec = importlib.util.spec_from_file_location(
        'mmpos2backbone', REPO / 'tools/model_converters/mmpos2backbone.py')
    converter = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(converter)
    converter.main([str(pretraining / 'iter_60.pth'), str(dst), '--config',
                    TRANSFER + 'mask-rcnn_cr2pq-vit-tiny_mini-coco.py'])
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


def finetune_steps(config, checkpoint, options, steps):
    """``config``'s model built and initialised from the backbone
    ``checkpoint`` as mmengine's Runner does, fine-tuned ``steps``
    iterations in this process on the first batch of the config's train
    dataloader with its optimizer and iteration-based warm-up
    (``conftest.runner_steps``, as the Runner's loops take them); then the
    config's evaluator scores its predictions on the first validation
    batch. Returns ``(backbone before, model, losses, metrics)``."""
    from mmengine.config import Config
    from mmengine.registry import MODELS, init_default_scope

    import mmpos  # noqa: F401
    cfg = Config.fromfile(config)
    cfg.merge_from_dict(dict(o.split('=', 1) for o in options))
    cfg.model.backbone.init_cfg.checkpoint = str(checkpoint)
    init_default_scope(cfg.default_scope)
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    before = {k: v.clone() for k, v in model.backbone.state_dict().items()}
    losses = runner_steps(cfg, model, steps)
    return before, model, losses, first_val_metrics(cfg, model)


@pytest.mark.slow
@pytest.mark.parametrize('config', sorted(DOWNSTREAM))
def test_backbone_transfers(config, backbone_checkpoint, mini_data):
    task, keys = DOWNSTREAM[config]
    pretrained = torch.load(backbone_checkpoint, map_location='cpu',
                            weights_only=True)['state_dict']
    before, model, losses, metrics = finetune_steps(
        TRANSFER + config, backbone_checkpoint,
        data_root_options(mini_data, task), FINETUNE_STEPS)
    # every tensor pretrained (the multi-level-neck configs have no final
    # LayerNorm ln1, the only checkpoint keys they leave out)
    assert set(before) <= set(pretrained)
    assert set(pretrained) - set(before) <= {'ln1.weight', 'ln1.bias'}
    assert all(torch.equal(before[k], pretrained[k]) for k in before)
    assert all(map(math.isfinite, losses)), losses
    assert losses[-1] < losses[0], losses
    # fine-tuning: the pretrained backbone trains with the rest
    after = model.backbone.state_dict()
    assert any(not torch.equal(v, after[k]) for k, v in before.items()
               if v.is_floating_point())
    for key in keys:
        assert math.isfinite(metrics[key]), (key, metrics)
