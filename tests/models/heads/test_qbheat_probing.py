"""QB-Heat decoder probing (Sec. 5, App. B-C): the classification probe
heads, and the probing configs. Each mini config loads a QB-Heat checkpoint's
backbone, which stays bit-identical while the decoder trains. One probe (the
tran-1 classification probe) trains end to end through tools/train.py on
mini data and is scored by mmpretrain's Accuracy; the linear, RetinaNet and
Deformable DETR probes are built and trained for a few steps in this
process (their own dataloader, optimizer and ``train_step``, as mmengine's
loops call it), the detectors' predictions scored by mmdet's CocoMetric.
The fine-tuning variants unfreeze the backbone and continue from their
probe's last checkpoint."""
import math
from pathlib import Path

import mmcv
import pytest
import torch
import torch.nn as nn
from mmengine.config import Config
from mmengine.registry import init_default_scope

import mmpos.models.backbones.mobile_former  # noqa: F401 (registers)
import mmpos.models.heads.probe_heads  # noqa: F401 (registers)
from conftest import (data_root_options, first_val_metrics, read_scalars,
                      run_tool, runner_steps)
from mmpos_harness.mini_data import make_mini_cls
from mmpos.models.selfsup.qbheat import QBHeat

PROBING = 'configs/qbheat/probing/'
DETR = PROBING + 'deformable-detr_mobileformer-285m-{}'
RETINANET = PROBING + 'retinanet_mobileformer-285m-{}'


@pytest.fixture(scope='module')
def qbheat_ckpt(tmp_path_factory):
    """A QB-Heat MF-285M checkpoint (tiny predictor and decoder) with random
    BatchNorm affines and statistics, so that a backbone that failed to load
    or let its statistics move would differ; returns (path, backbone state).
    """
    torch.manual_seed(0)
    model = QBHeat(
        backbone=dict(type='MobileFormer', arch='285m'),
        neck=dict(type='QBHeatPredictor', in_channels=720, embed_dims=32),
        head=dict(type='QBHeatHead', in_channels=32, num_layers=1,
                  num_heads=2,
                  loss=dict(type='PixelReconstructionLoss', criterion='L2')))
    model.init_weights()
    with torch.no_grad():
        for m in model.backbone.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0, 0.1)
                m.running_mean.normal_(0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    path = tmp_path_factory.mktemp('qbheat') / 'qbheat.pth'
    torch.save(dict(state_dict=model.state_dict()), path)
    return path, model.backbone.state_dict()


@pytest.fixture(scope='module')
def mini_cls(tmp_path_factory):
    """``<root>/cls``: the mini classification set at 64^2."""
    root = tmp_path_factory.mktemp('mini')
    make_mini_cls(str(root / 'cls'), num_train=48, num_val=24, img_size=64)
    return root


def assert_backbone_unchanged(state, backbone):
    for key, value in backbone.items():
        torch.testing.assert_close(state['backbone.' + key], value, rtol=0,
                                   atol=0, msg=key)


def train_probe(config, ckpt, work_dir, data_options):
    res = run_tool('tools/train.py', config, '--work-dir', work_dir,
                   '--cfg-options',
                   f'model.backbone.init_cfg.checkpoint={ckpt}',
                   *data_options)
    assert res.returncode == 0, res.stderr[-3000:]
    records = read_scalars(work_dir)
    losses = [r['loss'] for r in records if 'loss' in r]
    print(Path(config).name, 'losses', losses, 'last record', records[-1])
    return records, losses


def test_probe_heads():
    from mmpos.models.heads.probe_heads import (BNLinearClsHead,
                                                TransformerClsHead)
    lin = BNLinearClsHead(5, 8).train()
    assert not lin.bn.affine
    feats = (torch.randn(4, 8, 3, 3) * 7 + 3, )
    pooled = lin.pre_logits(feats)  # BN-normalised pooled features
    torch.testing.assert_close(pooled.mean(0), torch.zeros(8), atol=1e-5,
                               rtol=0)
    assert lin(feats).shape == (4, 5)
    tran = TransformerClsHead(5, 8, embed_dims=16, num_heads=2)
    assert tran((torch.randn(2, 8, 3, 3), )).shape == (2, 5)
    with pytest.raises(ValueError, match='feature map'):
        tran((torch.randn(2, 8), ))


def test_tran1_mf37g_matches_table6_params():
    """Tab. 6: MF-3.7G + tran-1 (d768) + classifier has 35M parameters."""
    from mmpos.models.backbones.mobile_former import MobileFormer
    from mmpos.models.heads.probe_heads import TransformerClsHead
    n = sum(p.numel() for m in (MobileFormer('3.7g'), TransformerClsHead(
        1000, 2880, embed_dims=768)) for p in m.parameters())
    assert n == pytest.approx(35e6, rel=0.04)


def _backbone(cfg):
    """The config's backbone, built and put in training mode."""
    from mmdet.registry import MODELS
    init_default_scope('mmdet')
    return MODELS.build(cfg.model.backbone).train()


def _bns(module):
    bns = [m for m in module.modules() if isinstance(m, nn.BatchNorm2d)]
    assert bns
    return bns


@pytest.mark.parametrize('frozen, finetune', [
    (DETR.format('frozen_8xb2-500e_coco.py'),
     DETR.format('finetune_8xb2-200e_coco.py')),
    (RETINANET.format('frozen_fpn_8xb2-1x_coco.py'),
     RETINANET.format('finetune_fpn_8xb2-1x_coco.py')),
], ids=['deformable-detr', 'retinanet'])
def test_finetune_config_unfreezes_and_continues_from_probe(frozen, finetune):
    """The probe trains nothing of the backbone, BN statistics included; its
    fine-tuning variant trains all of it (synchronised BN) at a tenth of the
    probe's lr, starting from the probe's last checkpoint (App. B.2)."""
    probe, ft = Config.fromfile(frozen), Config.fromfile(finetune)
    frozen_backbone, backbone = _backbone(probe), _backbone(ft)
    assert not any(p.requires_grad for p in frozen_backbone.parameters())
    assert not any(m.training for m in _bns(frozen_backbone))
    assert all(p.requires_grad for p in backbone.parameters())
    assert all(m.training for m in _bns(backbone))
    assert ft.sync_bn == 'torch' and ft.model.backbone.init_cfg is None
    assert ft.load_from == (f'work_dirs/{Path(frozen).stem}/epoch_'
                            f'{probe.train_cfg.max_epochs}.pth')
    assert ft.optim_wrapper.optimizer.lr == pytest.approx(
        probe.optim_wrapper.optimizer.lr / 10)


def train_steps(config, ckpt, data_options, steps, batches=1):
    """``config``'s model built and initialised from ``ckpt`` as mmengine's
    Runner does, then ``steps`` training iterations in this process with
    the config's optimizer and iteration-based lr schedule (the warm-up;
    ``model.train_step``, as the Runner's loops call it,
    ``conftest.runner_steps``) cycling over the first ``batches`` batches
    of the config's train dataloader. Returns ``(cfg, model, losses,
    decoder)``:
    ``decoder`` the tensors outside the backbone before training."""
    from mmengine.registry import MODELS
    cfg = Config.fromfile(config)
    cfg.merge_from_dict(dict(o.split('=', 1) for o in data_options))
    cfg.model.backbone.init_cfg.checkpoint = str(ckpt)
    init_default_scope(cfg.default_scope)
    torch.manual_seed(0)
    model_cfg = dict(cfg.model)
    if cfg.get('data_preprocessor') is not None:
        model_cfg.setdefault('data_preprocessor', cfg.data_preprocessor)
    model = MODELS.build(model_cfg)
    model.init_weights()
    decoder = {k: v.clone() for k, v in model.state_dict().items()
               if not k.startswith('backbone.')}
    losses = runner_steps(cfg, model, steps, batches)
    return cfg, model, losses, decoder


def assert_decoder_trained(before, model):
    after = model.state_dict()
    changed = [k for k, v in before.items()
               if v.is_floating_point() and not torch.equal(v, after[k])]
    assert changed, 'no decoder tensor changed'


@pytest.mark.parametrize('name, steps', [
    (RETINANET.format('frozen_fpn_mini-coco.py'), 4),
    (DETR.format('frozen_mini-coco.py'), 6)], ids=['retinanet', 'detr'])
def test_checkpoint_loads_into_frozen_detection_probe(
        name, steps, mini_data, qbheat_ckpt):
    """Frozen RetinaNet / Deformable DETR (the MF-Dec stand-in) probes of
    the mini COCO configs: the backbone is the checkpoint's after init and
    stays bit-identical (BN statistics included) while the decoder trains
    on one mini-COCO batch, whose loss falls; CocoMetric reports all six
    bbox APs of the trained probe's predictions."""
    ckpt, backbone = qbheat_ckpt
    cfg, model, losses, before = train_steps(
        name, ckpt, data_root_options(mini_data, 'coco'), steps)
    assert all(map(math.isfinite, losses)), losses
    assert min(losses[-2:]) < 0.95 * losses[0], losses
    # loaded from the checkpoint and not moved by training
    assert_backbone_unchanged(model.state_dict(), backbone)
    assert_decoder_trained(before, model)
    metrics = first_val_metrics(cfg, model)
    for key in ('', '_50', '_75', '_s', '_m', '_l'):
        assert -1 <= metrics['coco/bbox_mAP' + key] <= 1, metrics


def test_checkpoint_loads_into_linear_cls_probe(mini_cls, qbheat_ckpt):
    """The linear probe (BN without affine + linear classifier) of the mini
    classification config: the backbone is the checkpoint's and stays
    bit-identical while the head learns one batch (its loss falls)."""
    ckpt, backbone = qbheat_ckpt
    config = PROBING + 'mobileformer-285m_linear-probe_mini-cls.py'
    _, model, losses, before = train_steps(
        config, ckpt, data_root_options(mini_cls, 'cls'), 5)
    assert 'head.bn.running_var' in before
    assert 'head.bn.weight' not in before  # affine=False
    assert min(losses[-2:]) < 0.9 * losses[0], losses
    # loaded from the checkpoint and not moved by training
    assert_backbone_unchanged(model.state_dict(), backbone)
    assert_decoder_trained(before, model)


def _top1(config, state, val_dir):
    """Top-1 (%) of the probe ``state`` on ``val_dir``, computed here."""
    from mmpretrain.registry import MODELS
    cfg = Config.fromfile(config)
    init_default_scope('mmpretrain')
    cfg.model.backbone.init_cfg = None
    model = MODELS.build(
        dict(cfg.model, data_preprocessor=cfg.data_preprocessor)).eval()
    model.load_state_dict(state)
    images, labels = [], []
    for label, name in enumerate(sorted(p.name for p in val_dir.iterdir())):
        for path in sorted((val_dir / name).glob('*.jpg')):
            img = mmcv.imread(str(path))  # BGR, as LoadImageFromFile
            images.append(torch.from_numpy(img).permute(2, 0, 1))
            labels.append(label)
    with torch.no_grad():
        logits = model(
            model.data_preprocessor(dict(inputs=images))['inputs'])
    return (logits.argmax(1) == torch.tensor(labels)).float().mean() * 100


@pytest.mark.slow
def test_checkpoint_loads_into_mini_cls_tran1_probe(mini_cls, qbheat_ckpt,
                                                    tmp_path):
    """tran-1 probing through tools/train.py on the mini classification set
    (10 epochs, 30 iterations): the loss falls, the logged Accuracy is the
    trained probe's top-1 recomputed here, the backbone stays bit-identical
    to the checkpoint."""
    ckpt, backbone = qbheat_ckpt
    config = PROBING + 'mobileformer-285m_tran1-probe_mini-cls.py'
    records, losses = train_probe(config, ckpt, tmp_path,
                                  data_root_options(mini_cls, 'cls'))
    assert min(losses[-2:]) < 0.9 * losses[0], losses
    top1 = next(r for r in records if 'accuracy/top1' in r)['accuracy/top1']
    state = torch.load(tmp_path / 'epoch_10.pth', map_location='cpu',
                       weights_only=False)['state_dict']
    assert_backbone_unchanged(state, backbone)
    assert top1 == pytest.approx(
        float(_top1(config, state, mini_cls / 'cls' / 'val')), abs=1e-3)
