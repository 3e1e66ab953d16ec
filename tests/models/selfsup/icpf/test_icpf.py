"""DINOv2 base and ICPF extension: masks and their 50/50 split, [POS_MASK]
substitution, the EMA teacher and temperature schedules, the crop-box
pipelines of the configs, the field -> APE checkpoint conversion, and real
training runs through mmengine's Runner (losses, no collapse, schedules,
transfer)."""
import math
import os.path as osp
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.logging import MessageHub
from mmengine.registry import init_default_scope
from mmpretrain.structures import DataSample

import mmpos  # noqa: F401  (registers the backbone)
from mmpos.engine.hooks.dino_schedules_hook import TeacherTempHook
from mmpos.models.heads import dino_projection_head  # noqa: F401
from mmpos.models.losses import dino_losses  # noqa: F401
from mmpos.models.selfsup.dinov2 import DINOv2
from mmpos.models.selfsup.icpf import ICPF

from conftest import (DINO_BACKBONE, DINO_CROP_BOXES, DINO_HEAD, REPO,
                      assert_cosine_ema_steps, build_dino, dino_batch,
                      ema_teacher_step, read_scalars, run_tool,
                      start_ema_teachers)

sys.path.insert(0, osp.join(REPO, 'tools', 'model_converters'))
import mmpos2backbone  # noqa: E402

DINOV2_MINI = 'configs/dinov2/dinov2_vit-tiny_mini.py'
ICPF_MINI = 'configs/icpf/icpf_vit-tiny_mini.py'
DINOV2_SMALL = 'configs/dinov2/dinov2_vit-small-p16_4xb128-100e_in1k.py'
ICPF_SMALL = 'configs/icpf/icpf_vit-small-p16_4xb128-100e_in1k.py'
DOWNSTREAM = 'configs/demo/fpn_vit-tiny-rope-mixed_mini-ade.py'
# No-collapse floor: entropy (nats) of the batch-mean teacher distribution
# over the K = 256 prototypes of the mini configs, i.e. 0.25 * log K. A
# teacher collapsed onto one prototype gives ~0; the mini runs stay ~4.
ENTROPY_FLOOR = 0.25 * math.log(256)

BOXES = torch.tensor(DINO_CROP_BOXES)


@pytest.fixture(autouse=True)
def max_iters():
    MessageHub.get_current_instance().update_info('max_iters', 8)


@pytest.mark.parametrize('split', [(0.5, 0.5), (1., 0.), (0., 1.),
                                   (0.25, 0.5)])
def test_content_and_position_masks_split_disjoint(split):
    model = build_dino(mask_split=split)
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
    model = build_dino(DINOv2)
    masks = model._sample_masks(10, (4, 4), 'cpu')
    assert list(masks) == ['content']
    assert masks['content'].any(1).sum() == 5
    with pytest.raises(ValueError, match='mask_sample_prob'):
        build_dino(ICPF, mask_sample_prob=0.5)
    with pytest.raises(ValueError, match='mask_split'):
        build_dino(ICPF, mask_split=(0.7, 0.6))


def test_field_positions_and_pos_mask_token():
    model = build_dino()
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
    model = build_dino()
    inputs, samples = dino_batch()
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
    model = build_dino().eval()
    vit = MODELS.build(DINO_BACKBONE).eval()
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
    inputs, samples = dino_batch()
    no_field = build_dino(pos_field=None)
    assert no_field.pos_field is None
    losses = no_field.loss(inputs, [DataSample() for _ in samples])
    assert 'loss_pos' in losses
    no_pos = build_dino(mask_split=(0.5, 0.))
    assert no_pos.loss(inputs, samples)['loss_pos'].item() == 0
    const = build_dino(scale_aug=dict(distribution='const'),
                  pos_field=dict(type='PositionalField', size=19),
                  pos_masking='box')
    assert const.pos_field.field.shape[-2:] == (19, 19)
    assert const.maskings['pos'].__name__ == 'boxwise_masks'
    with pytest.raises(ValueError, match='distribution'):
        build_dino(scale_aug=dict(distribution='normal'))


def test_cosine_ema_teacher_schedule():
    """Teacher momentum 0.992 -> 1 (cosine over max_iters = 8): the hook's
    step 0 (before training) copies the student, each later one (after an
    optimizer step) averages; the loss leaves the teacher alone."""
    model = build_dino(DINOv2, teacher_momentum=0.992)
    teacher = model.teacher.module.backbone.cls_token
    before = teacher.detach().clone()
    model.loss(*dino_batch())
    assert torch.equal(teacher, before)
    assert_cosine_ema_steps(lambda: ema_teacher_step(model),
                            model.backbone.cls_token, teacher, 0.008)
    assert int(model.teacher.steps) == 3
    start_ema_teachers(model)  # a resumed run (steps > 0): no new copy
    assert int(model.teacher.steps) == 3


def test_loss_refuses_a_teacher_never_set():
    """Without EMATeacherHook the teacher would stay at its random init."""
    torch.manual_seed(0)
    model = ICPF(backbone=DINO_BACKBONE, head=DINO_HEAD,
                 patch_head=DINO_HEAD).train()
    with pytest.raises(RuntimeError, match='EMATeacherHook'):
        model.loss(*dino_batch())


def test_teacher_temperature_hook():
    hook = TeacherTempHook(start=0.04, end=0.07, warmup_iters=30)
    assert hook.value(0, 10) == pytest.approx(0.04)
    assert hook.value(15, 10) == pytest.approx(0.055)
    assert hook.value(100, 10) == pytest.approx(0.07)
    by_epoch = TeacherTempHook(start=0.04, end=0.07, warmup_epochs=2)
    assert by_epoch.value(5, 10) == pytest.approx(0.0475)
    with pytest.raises(ValueError, match='exactly one'):
        TeacherTempHook()


def test_teacher_temperature_hook_sets_the_targets_temperature(
        monkeypatch):
    """Before each iteration the hook sets ``teacher_temp``, which the
    teacher centering of the next step uses."""
    model = build_dino()
    temps = []
    centering = model.image_centering
    forward = centering.forward
    monkeypatch.setattr(centering, 'forward',
                        lambda logits, temp: temps.append(temp) or
                        forward(logits, temp))
    hook = TeacherTempHook(start=0.04, end=0.07, warmup_iters=30)
    inputs, samples = dino_batch()
    for it in (15, 100):
        hook.before_train_iter(
            SimpleNamespace(model=model, iter=it,
                            train_dataloader=[None] * 10), batch_idx=0)
        model.loss(inputs, samples)
    assert temps == [pytest.approx(0.055), pytest.approx(0.07)]
    with pytest.raises(AttributeError, match='no attribute'):
        TeacherTempHook(warmup_iters=1, attr='head.temp').before_train_iter(
            SimpleNamespace(model=model, iter=0, train_dataloader=[]), 0)


@pytest.mark.parametrize('icpf,dinov2', [(ICPF_MINI, DINOV2_MINI),
                                         (ICPF_SMALL, DINOV2_SMALL)])
def test_configs_keep_dinov2_views_and_record_their_boxes(icpf, dinov2):
    """Same views, crops and augmentations as the DINOv2 base; crop and
    flip are the box-recording ones, and ``crop_boxes`` is packed."""
    icpf_cfg = Config.fromfile(REPO / icpf)
    dinov2_cfg = Config.fromfile(REPO / dinov2)
    recording = {'RandomResizedCropWithBox': 'RandomResizedCrop',
                 'RandomFlipWithBox': 'RandomFlip'}
    views = icpf_cfg.train_pipeline[1]
    assert views.type == 'MultiViewWithBoxes'
    assert views.num_views == dinov2_cfg.train_pipeline[1].num_views
    for ours, theirs in zip(views.transforms,
                            dinov2_cfg.train_pipeline[1].transforms):
        assert [step.type for step in ours].count(
            'RandomResizedCropWithBox') == 1
        assert [dict(step, type=recording.get(step.type, step.type))
                for step in ours] == [dict(step) for step in theirs]
    assert icpf_cfg.train_pipeline[2] == dict(type='PackInputs',
                                              algorithm_keys=['crop_boxes'])
    assert icpf_cfg.train_dataloader.dataset.pipeline == \
        icpf_cfg.train_pipeline
    assert icpf_cfg.model.type == 'ICPF'
    assert icpf_cfg.model.boxes_key == 'crop_boxes'


def test_mini_pipeline_feeds_icpf(tmp_path):
    """The mini config's pipeline on an image file gives 2 global + 2 local
    views with one box each (globals first, areas in the crop ranges), and
    the config's model trains one step on the packed batch."""
    import mmcv
    from mmengine.dataset import Compose, default_collate
    from mmpretrain.registry import MODELS
    cfg = Config.fromfile(REPO / ICPF_MINI)
    init_default_scope('mmpretrain')
    pipeline = Compose(cfg.train_pipeline)
    rng = np.random.default_rng(0)
    path = str(tmp_path / 'img.png')
    mmcv.imwrite(rng.integers(0, 255, (96, 128, 3), dtype=np.uint8), path)
    np.random.seed(0)
    packed = [pipeline(dict(img_path=path)) for _ in range(2)]
    views = packed[0]['inputs']
    assert [tuple(v.shape) for v in views] == [(3, 64, 64)] * 2 + \
        [(3, 32, 32)] * 2
    boxes = torch.as_tensor(packed[0]['data_samples'].crop_boxes)
    assert boxes.shape == (4, 4) and boxes.dtype == torch.float32
    assert boxes.min() >= 0 and boxes.max() <= 1
    area = ((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])).abs()
    assert (area[:2] >= 0.32 - 1e-3).all() and (area[2:] <= 0.32 + 1e-3).all()

    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    start_ema_teachers(model)
    data = model.data_preprocessor(default_collate(packed), training=True)
    losses = model(**data, mode='loss')
    assert {'loss_image', 'loss_content', 'loss_pos', 'loss_koleo'} <= \
        set(losses)
    assert all(torch.isfinite(v) for v in losses.values())


def _convert(argv, capsys):
    """Run the mmpos2backbone CLI; ``(exit code, stdout, stderr)``."""
    try:
        mmpos2backbone.main([str(a) for a in argv])
        code = 0
    except SystemExit as exit_:
        code = exit_.code
    out = capsys.readouterr()
    return code, out.out, out.err


def _field_on_grid(field, grid):
    """The field resized to ``grid`` (what the full-image crop samples),
    ``(1, h * w, d)``."""
    resized = F.interpolate(field, size=grid, mode='bilinear',
                            align_corners=False)
    return resized.flatten(2).transpose(1, 2)


def test_converter_exports_the_field_as_the_ape(tmp_path, capsys):
    """mmpos2backbone turns an ICPF checkpoint into a plain APE ViT whose
    table is the field sampled on the whole image's patch grid."""
    model = build_dino().eval()
    with torch.no_grad():  # distinguishable student / teacher fields
        model.teacher.module.pos_field.field.add_(1.)
    src = tmp_path / 'iter_1.pth'
    torch.save(dict(meta=dict(iter=1), state_dict=model.state_dict()), src)
    student = model.backbone.state_dict()

    # default grid: the pretraining one (4 x 4); the plain ViT of the same
    # size then computes ICPF's whole-image features
    code, out, err = _convert([src, tmp_path / 'own.pth'], capsys)
    assert code == 0, err
    assert 'sampled on a 4x4 patch grid' in out
    saved = torch.load(tmp_path / 'own.pth', weights_only=True)
    from mmpretrain.registry import MODELS
    vit = MODELS.build(DINO_BACKBONE).eval()
    vit.load_state_dict(saved['state_dict'], strict=True)
    assert saved['meta']['positional_field_grid'] == [4, 4]
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.allclose(vit(images)[0], model.extract_feat(images),
                              atol=1e-5)

    # the grid of a downstream APE ViT config (3 x 5), checked strictly
    config = tmp_path / 'plain_vit.py'
    config.write_text(f'model = dict(backbone=dict({DINO_BACKBONE!r}, '
                      "img_size=(24, 40), out_type='featmap'))\n")
    code, out, err = _convert(
        [src, tmp_path / 'plain.pth', '--config', config], capsys)
    assert code == 0, err
    assert '0 missing key(s)' in out and '0 unexpected key(s)' in out
    plain = torch.load(tmp_path / 'plain.pth', weights_only=True)
    state = plain['state_dict']
    field = model.pos_field.field.detach()
    assert torch.allclose(state['pos_embed'][:, 1:],
                          _field_on_grid(field, (3, 5)), atol=1e-6)
    assert torch.equal(state['pos_embed'][:, :1], student['pos_embed'][:, :1])
    assert all(torch.equal(state[k], v) for k, v in student.items()
               if k != 'pos_embed')
    MODELS.build(Config.fromfile(config).model.backbone).load_state_dict(
        state, strict=True)

    # the teacher's backbone takes the teacher's field; --grid wins
    code, out, err = _convert(
        [src, tmp_path / 'teacher.pth', '--src-prefix',
         'teacher.module.backbone.', '--grid', 2, 6, '--keep-prefix'],
        capsys)
    assert code == 0, err
    teacher = torch.load(tmp_path / 'teacher.pth',
                         weights_only=True)['state_dict']
    assert torch.allclose(
        teacher['backbone.pos_embed'][:, 1:],
        _field_on_grid(model.teacher.module.pos_field.field, (2, 6)),
        atol=1e-6)

    # --grid needs a field: a DINOv2 checkpoint has none
    torch.save(dict(state_dict=build_dino(DINOv2).state_dict()), src)
    code, out, err = _convert([src, tmp_path / 'x.pth', '--grid', 2, 2],
                              capsys)
    assert code == 1 and '--grid applies to ICPF checkpoints' in err
    code, out, err = _convert([src, tmp_path / 'x.pth'], capsys)
    assert code == 0 and 'positional field' not in out


def _train(config, work_dir, *options):
    result = run_tool('tools/train.py', config, '--work-dir', work_dir,
                      '--cfg-options', *options, timeout=900)
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
        DINO_BACKBONE, arch=dict(embed_dims=96, num_layers=4, num_heads=3,
                            feedforward_channels=384),
        img_size=128, out_type='featmap'))
    weights = {k[len(prefix):]: v for k, v in state.items()
               if k.startswith(prefix)}
    # strict: every key matches (pos_embed is resized 8x8 -> 16x16 on load)
    backbone.load_state_dict(weights, strict=True)
    assert backbone(torch.randn(1, 3, 128, 128))[0].shape == (1, 96, 16, 16)
    return backbone


@pytest.mark.slow
def test_dinov2_mini_run(tmp_path, mini_data):
    """The DINOv2 mini run's losses fall without collapse; its EMA step
    counter and weight-decay schedule are where 60 iterations put them.
    That a resumed run continues both (and the optimizer, the schedulers,
    the RNG) exactly is tests/engine/hooks/test_resume.py's SIGKILL test of
    this config; ``--resume CKPT`` is tests/guardrails/test_run.py's."""
    _mini_run(DINOV2_MINI, tmp_path / 'run', mini_data)
    state = torch.load(tmp_path / 'run' / 'iter_60.pth', map_location='cpu',
                       weights_only=False)
    # EMATeacherHook: the copy before training, then one step per iteration
    assert int(state['state_dict']['teacher.steps']) == 61
    # weight decay 0.04 -> 0.4 cosine: the last (59th) step's value on the
    # decayed groups; no-decay groups stay at 0
    decays = {g['weight_decay'] for g in state['optimizer']['param_groups']}
    last = 0.04 + 0.36 * (1 - math.cos(math.pi * 59 / 60)) / 2
    assert sorted(decays) == [0.0, pytest.approx(last)]
    _load_into_downstream_backbone(state['state_dict'], 'backbone.')


@pytest.mark.slow
def test_icpf_mini_run_and_transfer(tmp_path, mini_data, capsys):
    """The ICPF mini config trains on the mini unlabeled images (crop boxes
    from the pipeline); its checkpoint converts to a plain APE ViT and loads
    into a downstream config (the mini Semantic FPN, APE variant)."""
    records = _mini_run(ICPF_MINI, tmp_path / 'run', mini_data)
    pos = [r['loss_pos'] for r in records if 'loss_pos' in r]
    assert sum(pos[-3:]) / 3 < sum(pos[:3]) / 3, pos  # Eq. 4 is learnt
    ckpt = tmp_path / 'run' / 'iter_60.pth'
    field = torch.load(ckpt, map_location='cpu',
                       weights_only=False)['state_dict']['pos_field.field']
    assert field.shape == (1, 96, 50, 50)

    downstream = tmp_path / 'fpn_vit-tiny-ape_mini-ade.py'
    downstream.write_text(
        f"_base_ = ['{REPO / DOWNSTREAM}']\n"
        "model = dict(backbone=dict(rope=None, use_ape=True, "
        "img_size=128))\n")
    converted = tmp_path / 'backbone.pth'
    code, out, err = _convert([ckpt, converted, '--keep-prefix', '--config',
                               downstream, '--drop-unexpected'], capsys)
    assert code == 0, err
    assert 'sampled on a 16x16 patch grid' in out
    # the dense model reads blocks 1-4 unnormalised: only ln1 has no place
    assert '0 missing key(s)' in out
    assert '2 unexpected key(s): backbone.ln1.bias, backbone.ln1.weight' \
        in out

    cfg = Config.fromfile(downstream)
    cfg.model.backbone.init_cfg.checkpoint = str(converted)
    init_default_scope('mmseg')
    from mmseg.registry import MODELS
    model = MODELS.build(cfg.model)
    model.init_weights()
    assert torch.allclose(model.backbone.pos_embed[:, 1:],
                          _field_on_grid(field, (16, 16)), atol=1e-6)
    with torch.no_grad():
        logits = model(torch.randn(1, 3, 128, 128), mode='tensor')
    assert logits.shape[:2] == (1, cfg.model.decode_head.num_classes)
    assert torch.isfinite(logits).all()
