"""Distillation from a frozen teacher (algorithm, :mod:`.distill`), DINOv3's
recipe on DINOv2's losses (:mod:`mmpos.models.selfsup.dinov2`)."""
from .distill import Distill, FrozenTeacher

__all__ = ['Distill', 'FrozenTeacher']
