"""QB-Heat decoder probing (Sec. 5, App. B-C): the classification probe
heads, and the probing configs. Each mini config loads a QB-Heat checkpoint's
backbone, which stays bit-identical while the decoder trains through
tools/train.py on mini data, and is scored by the real evaluators
(mmpretrain's Accuracy, mmdet's CocoMetric). The fine-tuning variants unfreeze
the backbone and continue from their probe's last checkpoint."""
from pathlib import Path

import mmcv
import pytest
import torch
import torch.nn as nn
from mmengine.config import Config
from mmengine.registry import init_default_scope

import mmpos.models.backbones.mobile_former  # noqa: F401 (registers)
import mmpos.models.heads.probe_heads  # noqa: F401 (registers)
from conftest import data_root_options, read_scalars, run_tool
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


@pytest.mark.slow
def test_checkpoint_loads_into_frozen_retinanet_probe(mini_data, qbheat_ckpt,
                                                      tmp_path):
    """Frozen RetinaNet on mini COCO (2 epochs): CocoMetric reports bbox AP,
    the backbone stays bit-identical to the checkpoint."""
    ckpt, backbone = qbheat_ckpt
    records, losses = train_probe(
        RETINANET.format('frozen_fpn_mini-coco.py'), ckpt, tmp_path,
        data_root_options(mini_data, 'coco'))
    assert losses and all(map(torch.isfinite, torch.tensor(losses)))
    assert any('coco/bbox_mAP' in r for r in records), records[-1]
    state = torch.load(tmp_path / 'epoch_2.pth', map_location='cpu',
                       weights_only=False)['state_dict']
    assert_backbone_unchanged(state, backbone)


@pytest.mark.slow
def test_checkpoint_loads_into_frozen_deformable_detr_probe(
        mini_data, qbheat_ckpt, tmp_path):
    """Frozen Deformable DETR (the MF-Dec stand-in) on mini COCO (3 epochs,
    36 iterations): the loss falls, CocoMetric reports all six bbox APs, the
    backbone stays bit-identical to the checkpoint."""
    ckpt, backbone = qbheat_ckpt
    records, losses = train_probe(
        DETR.format('frozen_mini-coco.py'), ckpt, tmp_path,
        data_root_options(mini_data, 'coco'))
    assert min(losses[-2:]) < 0.95 * losses[0], losses
    metrics = next(r for r in records if 'coco/bbox_mAP' in r)
    for key in ('', '_50', '_75', '_s', '_m', '_l'):
        assert -1 <= metrics['coco/bbox_mAP' + key] <= 1, metrics
    state = torch.load(tmp_path / 'epoch_3.pth', map_location='cpu',
                       weights_only=False)['state_dict']
    assert_backbone_unchanged(state, backbone)


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
@pytest.mark.parametrize('probe', ['linear', 'tran1'])
def test_checkpoint_loads_into_mini_cls_probe(probe, mini_cls, qbheat_ckpt,
                                              tmp_path):
    """Linear (BN without affine) and tran-1 probing on the mini
    classification set (10 epochs, 30 iterations): the loss falls, the
    logged Accuracy is the trained probe's top-1 recomputed here, the
    backbone stays bit-identical to the checkpoint."""
    ckpt, backbone = qbheat_ckpt
    config = PROBING + f'mobileformer-285m_{probe}-probe_mini-cls.py'
    records, losses = train_probe(config, ckpt, tmp_path,
                                  data_root_options(mini_cls, 'cls'))
    assert min(losses[-2:]) < 0.9 * losses[0], losses
    top1 = next(r for r in records if 'accuracy/top1' in r)['accuracy/top1']
    state = torch.load(tmp_path / 'epoch_10.pth', map_location='cpu',
                       weights_only=False)['state_dict']
    assert_backbone_unchanged(state, backbone)
    if probe == 'linear':
        assert 'head.bn.running_var' in state
        assert 'head.bn.weight' not in state  # affine=False
    assert top1 == pytest.approx(
        float(_top1(config, state, mini_cls / 'cls' / 'val')), abs=1e-3)
