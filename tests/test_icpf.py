"""DINOv2 base and ICPF extension: masks and their 50/50 split, [POS_MASK]
substitution, the EMA teacher and temperature schedules, and real training
runs through mmengine's Runner (losses, no collapse, resume, transfer)."""
import math

import pytest
import torch
from mmengine.logging import MessageHub
from mmpretrain.structures import DataSample

import mmpos  # noqa: F401  (registers the backbone)
from mmpos.engine.hooks.dino_schedules_hook import TeacherTempHook
from mmpos.models.heads import dino_head  # noqa: F401
from mmpos.models.losses import dino_losses  # noqa: F401
from mmpos.models.selfsup.dinov2 import DINOv2
from mmpos.models.selfsup.icpf import ICPF

from conftest import read_scalars, run_tool

DINOV2_MINI = 'configs/dinov2/dinov2_vit-tiny_mini.py'
ICPF_MINI = 'configs/icpf/icpf_vit-tiny_mini.py'
# No-collapse floor: entropy (nats) of the batch-mean teacher distribution
# over the K = 256 prototypes of the mini configs, i.e. 0.25 * log K. A
# teacher collapsed onto one prototype gives ~0; the mini runs stay ~4.
ENTROPY_FLOOR = 0.25 * math.log(256)

BACKBONE = dict(
    type='RoPEVisionTransformer',
    arch=dict(embed_dims=48, num_layers=2, num_heads=3,
              feedforward_channels=96),
    img_size=32,
    patch_size=8,
    rope_type='none',
    use_ape=True,
    out_type='raw',
    drop_path_rate=0.1)
HEAD = dict(type='DINOHead', in_channels=48, out_channels=64,
            hidden_channels=64, bottleneck_channels=16)
BOXES = torch.tensor([[0., 0., 1., 1.], [.6, .1, .1, .7],
                      [.2, .2, .5, .5], [.5, .6, .9, .9]])


@pytest.fixture(autouse=True)
def max_iters():
    MessageHub.get_current_instance().update_info('max_iters', 8)


def build(cls=ICPF, **kwargs):
    torch.manual_seed(0)
    model = cls(backbone=BACKBONE, head=HEAD, patch_head=HEAD, **kwargs)
    model.init_weights()
    return model.train()


def batch(num=4):
    inputs = [torch.randn(num, 3, 32, 32) for _ in range(2)] + \
        [torch.randn(num, 3, 16, 16) for _ in range(2)]
    samples = [DataSample(metainfo=dict(crop_boxes=BOXES))
               for _ in range(num)]
    return inputs, samples


@pytest.mark.parametrize('split', [(0.5, 0.5), (1., 0.), (0., 1.),
                                   (0.25, 0.5)])
def test_content_and_position_masks_split_disjoint(split):
    model = build(mask_split=split)
    num, hw = 16, (4, 4)
    masks = model._sample_masks(num, hw, 'cpu')
    content, pos = masks['content'].any(1), masks['pos'].any(1)
    assert not (content & pos).any()
    assert content.sum() == round(split[0] * num)
    assert pos.sum() == round(split[1] * num)
    counts = torch.cat([masks['content'].sum(1)[content],
                        masks['pos'].sum(1)[pos]])
    # per-image ratio in [0.1, 0.5] of the 16 patches
    assert counts.min() >= 2 and counts.max() <= 8


def test_dinov2_masks_half_the_global_images():
    model = build(DINOv2)
    masks = model._sample_masks(10, (4, 4), 'cpu')
    assert list(masks) == ['content']
    assert masks['content'].any(1).sum() == 5
    with pytest.raises(ValueError, match='mask_sample_prob'):
        build(ICPF, mask_sample_prob=0.5)
    with pytest.raises(ValueError, match='mask_split'):
        build(ICPF, mask_split=(0.7, 0.6))


def test_field_positions_and_pos_mask_token():
    model = build()
    hw = (4, 4)
    geometry = BOXES[None].expand(2, -1, -1)
    pos = model._positions(model, hw, slice(0, 2), geometry)
    # view-major: rows 0-1 are view 0 of both images (the full-image box)
    full = model.pos_field.to_pos_embed(hw)
    assert torch.allclose(pos[0], full[0]) and torch.allclose(pos[1], full[0])
    flipped = model.pos_field(BOXES[1:2], hw)
    assert torch.allclose(pos[2], flipped[0])
    pos_mask = torch.zeros(4, 16, dtype=torch.bool)
    pos_mask[1, [0, 5]] = True
    masked = model._student_positions(hw, slice(0, 2), geometry,
                                      dict(pos=pos_mask))
    token = model.pos_mask_token[0, 0]
    assert torch.equal(masked[1, 0], token) and torch.equal(masked[1, 5],
                                                            token)
    assert torch.equal(masked[~pos_mask], pos[~pos_mask])


def test_icpf_step_trains_field_and_tokens():
    model = build()
    inputs, samples = batch()
    losses = model.loss(inputs, samples)
    assert set(losses) == {'loss_image', 'loss_content', 'loss_pos',
                           'loss_koleo', 'teacher_entropy'}
    assert all(torch.isfinite(v) for v in losses.values())
    sum(v for k, v in losses.items() if 'loss' in k).backward()
    for name in ('pos_field.field', 'pos_mask_token', 'mask_token',
                 'patch_head.prototypes', 'backbone.cls_token'):
        grad = dict(model.named_parameters())[name].grad
        assert grad is not None and grad.abs().sum() > 0, name
    assert model.teacher.module.pos_field.field.requires_grad is False
    with pytest.raises(KeyError, match='crop_boxes'):
        model.loss(inputs, [DataSample() for _ in samples])


def test_field_exports_to_a_plain_vit():
    """After conversion a standard APE ViT computes what ICPF computes on
    whole images with the field."""
    from mmpretrain.registry import MODELS
    model = build().eval()
    vit = MODELS.build(BACKBONE).eval()
    vit.load_state_dict(model.backbone_state_dict(), strict=True)
    assert torch.allclose(vit.pos_embed[:, 1:],
                          model.pos_field.to_pos_embed((4, 4)))
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.allclose(vit(images)[0], model.extract_feat(images),
                              atol=1e-5)
    teacher_state = model.backbone_state_dict(use_teacher=True, hw=(2, 3))
    assert teacher_state['pos_embed'].shape == (1, 7, 48)


def test_ablation_switches():
    inputs, samples = batch()
    no_field = build(pos_field=None)
    assert no_field.pos_field is None
    losses = no_field.loss(inputs, [DataSample() for _ in samples])
    assert 'loss_pos' in losses
    no_pos = build(mask_split=(0.5, 0.))
    assert no_pos.loss(inputs, samples)['loss_pos'].item() == 0
    const = build(scale_aug=dict(distribution='const'),
                  pos_field=dict(type='PositionalField', size=19),
                  pos_masking='box')
    assert const.pos_field.field.shape[-2:] == (19, 19)
    assert const.maskings['pos'].__name__ == 'boxwise_masks'
    with pytest.raises(ValueError, match='distribution'):
        build(scale_aug=dict(distribution='normal'))


def test_cosine_ema_teacher_schedule():
    """Teacher momentum 0.992 -> 1 (cosine over max_iters = 8)."""
    model = build(DINOv2, teacher_momentum=0.992)
    inputs, samples = batch()
    model.loss(inputs, samples)  # step 0 copies the student
    student = model.backbone.cls_token
    teacher = model.teacher.module.backbone.cls_token
    assert torch.equal(student, teacher)
    for step in (1, 2):
        before = teacher.detach().clone()
        with torch.no_grad():
            student.add_(1.)
        model.loss(inputs, samples)
        weight = 0.008 * (math.cos(math.pi * step / 8) + 1) / 2
        expected = (1 - weight) * before + weight * student.detach()
        assert torch.allclose(teacher, expected, atol=1e-6)
    assert int(model.teacher.steps) == 3


def test_teacher_temperature_hook():
    hook = TeacherTempHook(start=0.04, end=0.07, warmup_iters=30)
    assert hook.value(0, 10) == pytest.approx(0.04)
    assert hook.value(15, 10) == pytest.approx(0.055)
    assert hook.value(100, 10) == pytest.approx(0.07)
    by_epoch = TeacherTempHook(start=0.04, end=0.07, warmup_epochs=2)
    assert by_epoch.value(5, 10) == pytest.approx(0.0475)
    with pytest.raises(ValueError, match='exactly one'):
        TeacherTempHook()


def _train(config, work_dir, *options, resume=None):
    extra = ['--resume', str(resume)] if resume else []
    result = run_tool('tools/train.py', config, '--work-dir', work_dir,
                      *extra, '--cfg-options', *options, timeout=900)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    return read_scalars(work_dir)


def _mini_run(config, work_dir, mini_data):
    """Train the mini config (checkpoints at 30 and 60); check losses fall
    and the teacher does not collapse."""
    data = f'train_dataloader.dataset.data_root={mini_data}/unlabeled/'
    records = _train(config, work_dir, data,
                     'default_hooks.checkpoint.interval=30')
    losses = [r['loss'] for r in records if 'loss' in r]
    entropies = [r['teacher_entropy'] for r in records if 'loss' in r]
    assert len(losses) >= 8
    assert all(math.isfinite(v) for v in losses)
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3, losses
    assert min(entropies) > ENTROPY_FLOOR, entropies
    return records


def _load_into_downstream_backbone(state, prefix):
    """The dense-task ViT (APE, featmap output) at another resolution."""
    from mmpretrain.registry import MODELS
    backbone = MODELS.build(dict(
        BACKBONE, arch=dict(embed_dims=96, num_layers=4, num_heads=3,
                            feedforward_channels=384),
        img_size=128, out_type='featmap'))
    weights = {k[len(prefix):]: v for k, v in state.items()
               if k.startswith(prefix)}
    # strict: every key matches (pos_embed is resized 8x8 -> 16x16 on load)
    backbone.load_state_dict(weights, strict=True)
    assert backbone(torch.randn(1, 3, 128, 128))[0].shape == (1, 96, 16, 16)
    return backbone


@pytest.mark.slow
def test_dinov2_mini_run_and_resume(tmp_path, mini_data):
    _mini_run(DINOV2_MINI, tmp_path / 'run', mini_data)
    state = torch.load(tmp_path / 'run' / 'iter_60.pth', map_location='cpu',
                       weights_only=False)
    assert int(state['state_dict']['teacher.steps']) == 60
    # weight decay 0.04 -> 0.4 cosine: the last (59th) step's value on the
    # decayed groups; no-decay groups stay at 0
    decays = {g['weight_decay'] for g in state['optimizer']['param_groups']}
    last = 0.04 + 0.36 * (1 - math.cos(math.pi * 59 / 60)) / 2
    assert sorted(decays) == [0.0, pytest.approx(last)]
    _load_into_downstream_backbone(state['state_dict'], 'backbone.')

    # Resume from iteration 30 in a new work dir: the EMA step counter and
    # the lr / weight-decay schedulers continue where they were.
    data = f'train_dataloader.dataset.data_root={mini_data}/unlabeled/'
    _train(DINOV2_MINI, tmp_path / 'resumed', data,
           'default_hooks.checkpoint.interval=30',
           resume=tmp_path / 'run' / 'iter_30.pth')
    resumed = torch.load(tmp_path / 'resumed' / 'iter_60.pth',
                         map_location='cpu', weights_only=False)
    assert int(resumed['state_dict']['teacher.steps']) == 60
    assert resumed['param_schedulers'] == state['param_schedulers']
    def decays(ckpt):
        return [g['weight_decay'] for g in ckpt['optimizer']['param_groups']]

    assert decays(resumed) == decays(state)


@pytest.mark.slow
def test_icpf_mini_run_and_transfer(tmp_path, mini_data):
    pytest.skip('configs/icpf still uses the DINOv2 multi-crop pipeline; '
                'switching it to MultiViewWithBoxes (crop_boxes) is issue 8 '
                'work in progress')
    _mini_run(ICPF_MINI, tmp_path / 'run', mini_data)
    from mmengine.config import Config
    from mmpretrain.registry import MODELS
    model = MODELS.build(Config.fromfile(ICPF_MINI).model)
    state = torch.load(tmp_path / 'run' / 'iter_60.pth', map_location='cpu',
                       weights_only=False)
    model.load_state_dict(state['state_dict'])
    exported = model.backbone_state_dict(hw=(16, 16))
    backbone = _load_into_downstream_backbone(
        {f'backbone.{k}': v for k, v in exported.items()}, 'backbone.')
    # the APE is the field resized to the downstream 16x16 grid
    assert torch.equal(backbone.pos_embed[:, 1:],
                       model.pos_field.to_pos_embed((16, 16)).detach())
