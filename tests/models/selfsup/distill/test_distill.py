"""Distillation from a frozen teacher (mmpos.models.selfsup.distill): the
teacher is frozen (no gradients, unchanged by training steps, eval mode),
students learn from one teacher forward, the losses are DINOv2's against
the teacher's targets, a teacher without heads or checkpoint is refused,
and the mini config trains with a falling loss."""
import copy

import pytest
import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper

from conftest import DINO_BACKBONE, DINO_HEAD, REPO, dino_batch
from mmpos.models.selfsup.dinov2 import DINOv2
from mmpos.models.selfsup.distill import Distill, FrozenTeacher

WIDE = dict(copy.deepcopy(DINO_BACKBONE),
            arch=dict(embed_dims=96, num_layers=2, num_heads=3,
                      feedforward_channels=192))
WIDE_HEAD = dict(DINO_HEAD, in_channels=96)
MINI = 'configs/distill/distill_vit-tiny-to-vit-mini_mini.py'


@pytest.fixture(scope='module')
def teacher_checkpoint(tmp_path_factory):
    """A DINOv2 of the teacher's shape, saved as mmpos saves one: its EMA
    teacher under ``teacher.module.``."""
    torch.manual_seed(0)
    model = DINOv2(backbone=WIDE, head=WIDE_HEAD, patch_head=WIDE_HEAD)
    model.init_weights()
    model.teacher.module.load_state_dict(
        model._distilled_modules().state_dict())
    path = tmp_path_factory.mktemp('teacher') / 'dinov2.pth'
    torch.save(dict(state_dict=model.state_dict()), path)
    return str(path), model


def _distill(checkpoint, prefix='teacher.module.', students=()):
    torch.manual_seed(1)
    model = Distill(
        teacher=dict(backbone=WIDE, head=WIDE_HEAD, patch_head=WIDE_HEAD,
                     checkpoint=checkpoint, prefix=prefix),
        backbone=DINO_BACKBONE, head=DINO_HEAD, patch_head=DINO_HEAD,
        students=students)
    model.init_weights()
    return model.train()


def test_teacher_is_the_checkpoints_frozen_network(teacher_checkpoint):
    path, source = teacher_checkpoint
    model = _distill(path)
    loaded = model.teacher.state_dict()
    for key, value in source.teacher.module.state_dict().items():
        assert torch.equal(loaded[key], value), key
    assert not any(p.requires_grad for p in model.teacher.parameters())
    assert not model.teacher.training  # eval mode inside a training model
    assert model.ema_teachers() == []

    inputs, samples = dino_batch()
    wrapper = build_optim_wrapper(model, dict(
        optimizer=dict(type='AdamW', lr=1e-3)))
    before = copy.deepcopy(model.teacher.state_dict())
    student = copy.deepcopy(model.backbone.state_dict())
    for _ in range(2):
        losses = model.loss(inputs, samples)
        wrapper.update_params(model.parse_losses(losses)[0])
        assert all(p.grad is None for p in model.teacher.parameters())
    after = model.teacher.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert any(not torch.equal(student[k], v)
               for k, v in model.backbone.state_dict().items())


def test_losses_are_dinov2s_against_the_teachers_targets(
        teacher_checkpoint):
    """With the teacher's own network as an EMA teacher, DINOv2 computes the
    same losses from the same masks: the distillation changes only where
    the targets come from."""
    path, _ = teacher_checkpoint
    model = _distill(path)
    inputs, samples = dino_batch()
    torch.manual_seed(5)
    losses = model.loss(inputs, samples)

    dinov2 = DINOv2(backbone=DINO_BACKBONE, head=DINO_HEAD,
                    patch_head=DINO_HEAD)
    dinov2.load_state_dict(
        {k: v for k, v in model.state_dict().items()
         if not k.startswith('teacher.')}, strict=False)
    teacher = model.teacher
    dinov2.teacher.module = torch.nn.ModuleDict(dict(
        backbone=teacher.backbone, head=teacher.head,
        patch_head=teacher.patch_head))
    dinov2._teachers_set = True
    dinov2.train()
    torch.manual_seed(5)
    expected = dinov2.loss(inputs, samples)
    assert losses.keys() == expected.keys()
    for key in losses:
        torch.testing.assert_close(losses[key], expected[key], rtol=1e-6,
                                   atol=0)


def test_students_learn_from_one_teacher_forward(teacher_checkpoint):
    path, _ = teacher_checkpoint
    other = dict(backbone=dict(DINO_BACKBONE, arch=dict(
        embed_dims=24, num_layers=1, num_heads=2, feedforward_channels=48)),
        head=dict(DINO_HEAD, in_channels=24),
        patch_head=dict(DINO_HEAD, in_channels=24))
    model = _distill(path, students=[other])
    calls = []
    model.teacher.backbone.patch_embed.register_forward_hook(
        lambda *args: calls.append(1))
    inputs, samples = dino_batch()
    losses = model.loss(inputs, samples)
    assert len(calls) == 1
    assert {'loss_image', 's1.loss_image', 's1.loss_content',
            's1.loss_koleo'} <= set(losses)
    total = model.parse_losses(losses)[0]
    total.backward()
    second = model.students[0]
    assert second.backbone.embed_dims == 24
    assert all(p.grad is not None for p in second.backbone.parameters()
               if p.requires_grad)
    # the students' own teachers are not built: one teacher in the model
    assert second.teacher is None
    teachers = [m for m in model.modules() if isinstance(m, FrozenTeacher)]
    assert len(teachers) == 1


def test_a_teacher_without_heads_or_checkpoint_is_refused(
        teacher_checkpoint, tmp_path):
    path, source = teacher_checkpoint
    backbone_only = tmp_path / 'backbone.pth'
    torch.save(dict(state_dict={
        k: v for k, v in source.state_dict().items()
        if k.startswith('teacher.module.backbone.')}), backbone_only)
    with pytest.raises(ValueError, match='holds no weights for head'):
        _distill(str(backbone_only))
    with pytest.raises(ValueError, match='checkpoint is not set'):
        _distill(None)
    with pytest.raises(ValueError, match='patch size'):
        Distill(teacher=dict(backbone=dict(WIDE, patch_size=16),
                             head=WIDE_HEAD, patch_head=WIDE_HEAD),
                backbone=DINO_BACKBONE, head=DINO_HEAD, patch_head=DINO_HEAD)
    with pytest.raises(ValueError, match='prototypes'):
        Distill(teacher=dict(backbone=WIDE,
                             head=dict(WIDE_HEAD, out_channels=32),
                             patch_head=WIDE_HEAD),
                backbone=DINO_BACKBONE, head=DINO_HEAD, patch_head=DINO_HEAD)


def test_mini_config_distils_with_a_falling_loss(tmp_path, mini_data):
    """The mini config: its teacher is the mini DINOv2 (here at its
    initialisation, saved as the DINOv2 config saves it), its student
    trains on the config's own pipeline and optimizer."""
    from conftest import runner_steps
    from mmengine.registry import init_default_scope
    from mmpos.registry import MODELS
    cfg = Config.fromfile(str(REPO / MINI))
    init_default_scope(cfg.get('default_scope', 'mmpretrain'))
    torch.manual_seed(0)
    teacher_cfg = Config.fromfile(
        str(REPO / 'configs/dinov2/dinov2_vit-tiny_mini.py')).model
    source = MODELS.build(teacher_cfg)
    source.init_weights()
    source.teacher.module.load_state_dict(
        source._distilled_modules().state_dict())
    path = tmp_path / 'teacher.pth'
    torch.save(dict(state_dict=source.state_dict()), path)
    cfg.model.teacher.checkpoint = str(path)
    cfg.train_dataloader.dataset.data_root = str(mini_data / 'unlabeled')
    model = MODELS.build(cfg.model)
    model.init_weights()
    assert model.backbone.embed_dims == 48
    assert model.teacher.backbone.embed_dims == 96
    losses = runner_steps(cfg, model, steps=12)
    assert all(torch.isfinite(torch.tensor(v)) for v in losses)
    assert sum(losses[-3:]) < sum(losses[:3])
