"""Distillation of smaller ViTs from a large frozen teacher, DINOv3's recipe.

DINOv3 (Simeoni et al., 2025, Sec. 5.2) distils its small models from the
7B model instead of pretraining them alone, with the self-distillation
losses of its pretraining (facebookresearch/dinov3,
``dinov3/train/multidist_meta_arch.py``):

* the teacher (backbone, DINO head and iBOT head) is frozen: no gradients,
  no EMA update, always in eval mode; it sees the global crops, unmasked;
* its head outputs, centred by Sinkhorn-Knopp at ``teacher_temp``, are
  the targets of the student's DINO loss on every crop (ICPF Eq. 1) and of
  its iBOT loss on the masked patches of the global crops (Eq. 2);
* KoLeo on the student's global class tokens;
* several students learn from one teacher forward (DINOv3 gives each
  student its own group of GPUs and broadcasts the teacher's outputs to
  them; here they share the process and the targets).

:class:`Distill` is :class:`~mmpos.models.selfsup.dinov2.DINOv2` with the
EMA teacher replaced by that frozen network (:meth:`teacher_targets` and
:meth:`student_losses` are DINOv2's, unchanged). Its own ``backbone``,
``head`` and ``patch_head`` are the first student; ``students`` adds
more, each a dict of the keys that differ (``backbone``, ``head``,
``patch_head``), sharing the teacher's targets and the masks. Their losses
are logged as ``s<i>.loss_*`` and summed with the first student's.

The teacher's weights come from ``teacher.checkpoint``: an mmpos DINOv2
checkpoint with ``prefix='teacher.module.'`` (its EMA teacher, the
default) or ``''`` (its student), loaded strictly by
:meth:`FrozenTeacher.init_weights`, which refuses a checkpoint without
the heads' weights: the targets would come from random projections.
Backbone-only checkpoints (what the timm and DINOv3 converters write;
DINOv3's released weights hold no heads) cannot teach with this recipe.
"""
from typing import Dict, List, Optional, Sequence, Tuple

import torch.nn as nn
from mmengine.model import BaseModule
from mmpretrain.structures import DataSample
from torch import Tensor

from mmpos.registry import MODELS
from ..dinov2 import DINOv2


class FrozenTeacher(BaseModule):
    """The teacher network (``backbone``, ``head``, optional
    ``patch_head``), frozen: parameters without gradients, eval mode.

    Args:
        backbone, head, patch_head: their configs.
        checkpoint: the checkpoint the weights come from (required).
        prefix: the teacher's keys in it (``'teacher.module.'``: an mmpos
            DINOv2's EMA teacher; ``''``: its student).
    """

    def __init__(self, backbone: dict, head: dict,
                 patch_head: Optional[dict] = None,
                 checkpoint: Optional[str] = None,
                 prefix: str = 'teacher.module.'):
        super().__init__()
        self.backbone = MODELS.build(backbone)
        self.head = MODELS.build(head)
        if patch_head:
            self.patch_head = MODELS.build(patch_head)
        self.checkpoint, self.prefix = checkpoint, prefix
        self.requires_grad_(False)

    def init_weights(self):
        """Load every weight from :attr:`checkpoint` (strictly): a teacher
        with random parts teaches nothing."""
        from mmengine.runner.checkpoint import _load_checkpoint
        if not self.checkpoint:
            raise ValueError(
                'Distill: model.teacher.checkpoint is not set: a random '
                'teacher teaches nothing')
        state = _load_checkpoint(self.checkpoint, map_location='cpu')
        state = state.get('state_dict', state)
        state = {k[len(self.prefix):]: v for k, v in state.items()
                 if k.startswith(self.prefix)}
        missing = sorted(set(self.state_dict()) - set(state))
        if any(not k.startswith('backbone.') for k in missing):
            raise ValueError(
                f'Distill: the teacher checkpoint {self.checkpoint} (prefix '
                f'{self.prefix!r}) holds no weights for '
                f'{", ".join(missing[:3])}{" ..." if len(missing) > 3 else ""}'
                ': backbone-only checkpoints cannot teach with the DINO / '
                'iBOT heads of this recipe')
        self.load_state_dict(state, strict=True)

    def train(self, mode: bool = True):
        return super().train(False)


@MODELS.register_module()
class Distill(DINOv2):
    """DINOv3's distillation (module docstring).

    Args:
        teacher: :class:`FrozenTeacher` arguments: ``backbone``, ``head``,
            ``patch_head``, the ``checkpoint`` and ``prefix`` they load.
        students: further students, each a dict of DINOv2 arguments that
            differ from this model's (``backbone``, ``head``,
            ``patch_head``); ``None`` (default) or empty: one student.
        **kwargs: :class:`DINOv2` arguments of the first student;
            ``teacher_momentum`` / ``end_teacher_momentum`` do not apply.
    """

    def __init__(self, teacher: Optional[dict], students: Sequence[dict] = (),
                 **kwargs):
        self._teacher_cfg = teacher
        super().__init__(**kwargs)
        if teacher is not None:
            self._check_matches(self, 'the student')
        self.students = nn.ModuleList(
            Distill(None, **{**kwargs, **student}) for student in students)
        for i, student in enumerate(self.students, 1):
            self._check_matches(student, f'students[{i - 1}]')

    def _build_teacher(self):
        self.teacher = (None if self._teacher_cfg is None else
                        FrozenTeacher(**self._teacher_cfg))

    def teacher_network(self) -> nn.Module:
        return self.teacher

    def _check_matches(self, student: DINOv2, name: str) -> None:
        """The teacher's targets must fit ``student``: its patch grid and
        the heads' prototype counts."""
        teacher = self.teacher
        if tuple(teacher.backbone.patch_size) != tuple(
                student.backbone.patch_size):
            raise ValueError(
                f'Distill: {name} has patch size '
                f'{tuple(student.backbone.patch_size)}, the teacher '
                f'{tuple(teacher.backbone.patch_size)}: the iBOT targets '
                'are per patch')
        for head in ('head', 'patch_head'):
            t, s = (self._patch_head(n) if head == 'patch_head' else n.head
                    for n in (teacher, student))
            if t.prototypes.shape[0] != s.prototypes.shape[0]:
                raise ValueError(
                    f'Distill: {name}.{head} has {s.prototypes.shape[0]} '
                    f'prototypes, the teacher\'s {t.prototypes.shape[0]}')

    def train(self, mode: bool = True):
        nn.Module.train(self, mode)
        if self.teacher is not None:
            self.teacher.train(False)
        return self

    def ema_teachers(self) -> List[Tuple[nn.Module, nn.Module]]:
        """None: the teacher is frozen (no EMATeacherHook update)."""
        return []

    def loss(self, inputs: List[Tensor], data_samples: List[DataSample],
             **kwargs) -> Dict[str, Tensor]:
        """One teacher forward, every student's losses (module docstring).

        Args:
            inputs: views, globals first, each ``(B, 3, H, W)``.
            data_samples: one per image.
        """
        if self.teacher is None:
            raise RuntimeError('Distill: a further student has no teacher; '
                               'its losses come from the first student')
        globals_ = self._split_views(inputs)[0]
        hw = self._grid(globals_)
        masks = self._sample_masks(self.num_global_crops * len(inputs[0]),
                                   hw, globals_.device)
        targets = self.teacher_targets(globals_, hw, None, masks)
        losses = self.student_losses(inputs, None, masks, targets)
        for i, student in enumerate(self.students, 1):
            for key, value in student.student_losses(
                    inputs, None, masks, targets).items():
                losses[f's{i}.{key}'] = value
        return losses
