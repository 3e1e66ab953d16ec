"""Full-size rehearsals (mmpos_harness.rehearsal): the synthetic data is read
by the real dataset classes through the configs' own pipelines, a
rehearsal changes only what it lists, and one paper config per family
(pretraining, mmdet ViTDet, mmseg UperNet) runs unshrunk through
``dist_train.sh``: 2 iterations, validation, checkpoint and resume."""
import math

import pytest
import torch

from conftest import REPO
from mmpos.guardrails.launch import load_config
from mmpos_harness import rehearsal

PRETRAIN = 'configs/cr2pq/cr2pq_vit-small-p16_32xb64-100e_in1k.py'
VITDET = ('configs/transfer/mmdet/'
          'mask-rcnn_vit-small-p16-ape_simple-fpn_lsj-1024_8xb8-12e_coco.py')
UPERNET = ('configs/transfer/mmseg/'
           'upernet_vit-small-p16-rope-mixed_mln_4xb4-160k_ade20k-512x512.py')
DISTILL = 'configs/distill/distill_vit-tiny-to-vit-mini_mini.py'


def _dataset(cfg, key):
    from mmengine.registry import DATASETS, init_default_scope
    init_default_scope(cfg.get('default_scope', 'mmpos'))
    return DATASETS.build(cfg[key].dataset)


@pytest.mark.parametrize('config', [PRETRAIN, VITDET, UPERNET])
def test_synthetic_data_read_by_the_config_pipeline(config, tmp_path):
    cfg = load_config(str(REPO / config))
    changes = rehearsal.rehearsal_config(cfg, str(tmp_path), procs=2)
    batch = cfg.train_dataloader.batch_size
    train = _dataset(cfg, 'train_dataloader')
    assert len(train) == 2 * batch * rehearsal.ITERS
    sample = train[0]  # the config's own training pipeline
    assert 'inputs' in sample
    if cfg.get('val_dataloader'):
        val = _dataset(cfg, 'val_dataloader')
        assert len(val) == 2 and 'inputs' in val[0]
    # every path the run reads is under the synthetic root
    dumped = cfg.pretty_text
    assert 'data/coco' not in dumped and 'data/ade' not in dumped
    assert 'data/imagenet' not in dumped
    assert any('synthetic' in line for line in changes)


def test_rehearsal_changes_only_what_it_lists(tmp_path):
    cfg = load_config(str(REPO / UPERNET))
    before = load_config(str(REPO / UPERNET))
    changes = rehearsal.rehearsal_config(cfg, str(tmp_path), procs=2)
    assert 'SyncBN' in str(before.model) and 'SyncBN' not in str(cfg.model)
    assert any(line.startswith('SyncBN -> BN') for line in changes)
    assert cfg.train_dataloader.batch_size == 2  # BN needs 2 per channel
    assert cfg.train_cfg.max_iters == rehearsal.ITERS
    # the model is the config's, apart from the norm layers
    assert cfg.model.backbone == before.model.backbone
    assert (cfg.val_dataloader.dataset.pipeline ==
            before.val_dataloader.dataset.pipeline)
    amp = load_config(str(REPO / PRETRAIN))
    assert amp.optim_wrapper.type == 'AmpOptimWrapper'
    changes = rehearsal.rehearsal_config(amp, str(tmp_path / 'p'), procs=2)
    assert amp.optim_wrapper.type == 'OptimWrapper'
    assert 'loss_scale' not in amp.optim_wrapper
    assert amp.train_cfg.max_epochs == 1
    assert amp.train_dataloader.batch_size == 1


@pytest.mark.slow
@pytest.mark.parametrize('config,procs', [(PRETRAIN, 2), (VITDET, 1),
                                          (UPERNET, 1)])
def test_rehearse_at_full_size(config, procs, tmp_path, monkeypatch):
    """The pretraining config with 2 processes (DDP over gloo); the
    detection and segmentation configs, whose 1024 px / 512 px steps cost
    about a minute each on 2 cores, with 1 process under the same launcher
    (their stored rehearsals use 2). One iteration per launch instead of
    the stored rehearsals' 2: the resume still has to continue at the
    saved iteration."""
    monkeypatch.setattr(rehearsal, 'ITERS', 1)
    result = rehearsal.rehearse(config, procs=procs,
                                work_root=str(tmp_path))
    assert len(result['losses']) == 2  # one each side of the resume
    assert result['resumed_at'] == 1
    assert all(math.isfinite(v) for v in result['losses'])
    assert result['peak_rss_mib'] > 100
    if load_config(str(REPO / config)).get('val_dataloader'):
        assert result['val_passes'] >= 1  # the validation step ran


@pytest.mark.parametrize('config,koleo', [
    ('configs/dinov2/dinov2_vit-small-p16_4xb128-100e_in1k.py', True),
    ('configs/icpf/icpf_vit-small-p16_4xb128-100e_in1k.py', True),
    (PRETRAIN, False)])
def test_a_koleo_loss_rehearses_two_images_per_process(config, koleo):
    """KoLeo takes each image's nearest neighbour in its process's batch:
    a model with one (given, or its class's default) rehearses with 2
    images per process, one without it with 1."""
    cfg = load_config(str(REPO / config))
    assert rehearsal._koleo(cfg.model) is koleo
    cfg.model.pop('koleo_loss', None)  # the class's default decides
    assert rehearsal._koleo(cfg.model) is koleo


def test_checkpoints_of_other_runs_are_stood_in_for_and_listed(tmp_path):
    """A config that starts from another run's checkpoint rehearses without
    it: CR2PQ's frozen DINO ResNet-50 teacher gets its network at random
    initialisation (which the model then loads: it refuses a missing
    file), a fine-tuning's load_from and a frozen probe's Pretrained
    init_cfg are dropped; each change is listed."""
    from mmengine.registry import init_default_scope

    from mmpos.registry import MODELS
    cr2pq = load_config(str(REPO / 'configs/cr2pq/'
                            'cr2pq_vit-small-p16_dino-r50-teacher_32xb64-'
                            '100e_in1k.py'))
    changes = rehearsal.rehearsal_config(cr2pq, str(tmp_path / 'c'), 2)
    assert any(c.startswith("model.teacher_checkpoint='checkpoints/dino_"
                            'resnet50') for c in changes)
    init_default_scope('mmpos')
    model = MODELS.build(cr2pq.model)
    model.init_weights()  # loads the stand-in strictly enough to pass
    assert not any(p.requires_grad
                   for p in model.target_generator.parameters())
    ft = load_config(str(REPO / 'configs/qbheat/finetune/mobileformer-3.7g_'
                         'tran1-ft_8xb64-coslr-100e_in1k.py'))
    assert ft.load_from
    changes = rehearsal.rehearsal_config(ft, str(tmp_path / 'f'), 2)
    assert ft.load_from is None
    assert any(c.startswith('load_from=') for c in changes)
    probe = load_config(str(REPO / 'configs/qbheat/probing/retinanet_'
                            'mobileformer-285m-frozen_fpn_8xb2-1x_coco.py'))
    changes = rehearsal.rehearsal_config(probe, str(tmp_path / 'p'), 2)
    assert 'Pretrained' not in str(probe.model)
    assert any(c.startswith('model.backbone.init_cfg Pretrained')
               for c in changes)


def test_a_linear_probe_head_rehearses_two_images_per_process(tmp_path):
    """The QB-Heat linear probe's head normalises pooled features with a
    BatchNorm1d that trains: 2 images per process (1 is refused); the
    CR2PQ ResNet-50 teacher's BatchNorm2d needs no pair."""
    probe = load_config(str(REPO / 'configs/qbheat/probing/mobileformer-'
                            '3.7g_linear-probe_8xb512-coslr-90e_in1k.py'))
    assert rehearsal._batchnorm_1d(probe.model)
    changes = rehearsal.rehearsal_config(probe, str(tmp_path), procs=2)
    assert probe.train_dataloader.batch_size == 2
    assert any('BatchNorm1d' in c for c in changes)
    cr2pq = load_config(str(REPO / 'configs/cr2pq/cr2pq_vit-small-p16_dino-'
                            'r50-teacher_32xb64-100e_in1k.py'))
    assert not rehearsal._batchnorm_1d(cr2pq.model)


def test_a_schedule_that_begins_after_the_rehearsal_keeps_its_end(tmp_path):
    """The Swin-T RoPE-Mixed recipe's cosine begins after 20 warm-up
    epochs and ends, by default, at the loop's 300: the rehearsal pins that
    end before it shortens the loop to 1 epoch, and mmengine builds the
    schedule (it refused begin=20, end=1)."""
    from mmengine.optim import build_optim_wrapper
    from mmengine.optim.scheduler import CosineAnnealingLR
    cfg = load_config(str(REPO / 'configs/rope_vit/swin-tiny_rope-mixed_'
                          '16xb64-300e_in1k.py'))
    changes = rehearsal.rehearsal_config(cfg, str(tmp_path), procs=2)
    cosine = cfg.param_scheduler[1]
    assert (cosine.begin, cosine.end) == (20, 300)
    assert cfg.train_cfg.max_epochs == 1
    assert any('CosineAnnealingLR.end=300' in c for c in changes)
    optim = build_optim_wrapper(torch.nn.Linear(2, 2), dict(
        optimizer=dict(type='SGD', lr=0.1)))
    kwargs = {k: v for k, v in cosine.items()
              if k not in ('type', '_scope_', 'convert_to_iter_based')}
    CosineAnnealingLR(optim, **kwargs)


def test_a_distillation_rehearses_with_a_synthetic_teacher(tmp_path):
    """A distillation config ships no teacher checkpoint: the rehearsal
    writes the configured teacher at its random initialisation, which the
    teacher then loads strictly (FrozenTeacher.init_weights)."""
    from mmengine.registry import init_default_scope

    from mmpos.registry import MODELS
    cfg = load_config(str(REPO / DISTILL))
    assert not cfg.model.teacher.checkpoint
    cfg.model.teacher.checkpoint = rehearsal.synthetic_teacher(
        cfg.model.teacher, str(tmp_path / 'teacher.pth'))
    init_default_scope('mmpos')
    model = MODELS.build(cfg.model)
    model.teacher.init_weights()
    saved = torch.load(cfg.model.teacher.checkpoint)['state_dict']
    assert saved.keys() == {'teacher.module.' + k
                            for k in model.teacher.state_dict()}
    assert all(not p.requires_grad for p in model.teacher.parameters())
