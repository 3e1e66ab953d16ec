"""Teacher-temperature schedule for DINO-family algorithms.

The other DINOv2 schedules need no hook:

* EMA momentum ``0.992 -> 1`` (cosine over the run): mmpretrain's
  ``CosineEMA`` (the teacher of :class:`DINOv2`); its step counter is a
  buffer of the model, so it is checkpointed and resumed.
* Weight decay ``0.04 -> 0.4`` (cosine): mmengine's
  ``CosineAnnealingParamScheduler(param_name='weight_decay',
  eta_min_ratio=10)`` — a ratio keeps the groups without decay at 0; its
  state is saved with the other parameter schedulers.
* Learning-rate warm-up + cosine: mmengine's ``LinearLR``,
  ``CosineAnnealingLR``.

mmpretrain's ``WarmupParamHook`` only ramps a value up from 0, so the DINO
teacher temperature warm-up (``start -> end``) is this hook. The value is a
function of ``runner.iter`` only, hence resumes exactly.
"""
import operator
from typing import Optional

from mmengine.hooks import Hook
from mmpretrain.utils import get_ori_model

from mmpos.registry import HOOKS


@HOOKS.register_module()
class TeacherTempHook(Hook):
    """Linear teacher-temperature warm-up, then constant.

    ``temp(it) = start + (end - start) * min(1, it / warmup)`` set on
    ``model.<attr>`` before every training iteration, where ``warmup`` is
    ``warmup_iters`` or ``warmup_epochs * len(train_dataloader)``.

    Args:
        start: temperature at iteration 0 (DINO: 0.04).
        end: temperature after the warm-up (DINOv2: 0.07; ICPF: 0.04 const.,
            i.e. no hook or ``start == end``).
        warmup_epochs / warmup_iters: warm-up length (exactly one of them).
        attr: dotted attribute path on the (unwrapped) model.
    """
    priority = 'NORMAL'

    def __init__(self,
                 start: float = 0.04,
                 end: float = 0.07,
                 warmup_epochs: Optional[float] = None,
                 warmup_iters: Optional[int] = None,
                 attr: str = 'teacher_temp'):
        if (warmup_epochs is None) == (warmup_iters is None):
            raise ValueError('TeacherTempHook needs exactly one of '
                             'warmup_epochs and warmup_iters')
        if min(start, end) <= 0:
            raise ValueError(f'temperatures must be > 0, got start={start}, '
                             f'end={end}')
        self.start = start
        self.end = end
        self.warmup_epochs = warmup_epochs
        self.warmup_iters = warmup_iters
        owner, _, self.name = attr.rpartition('.')
        self.get_owner = operator.attrgetter(owner) if owner else (
            lambda model: model)

    def value(self, cur_iter: int, iters_per_epoch: int) -> float:
        """Temperature at ``cur_iter``."""
        warmup = self.warmup_iters if self.warmup_iters is not None else \
            self.warmup_epochs * iters_per_epoch
        frac = min(1., cur_iter / warmup) if warmup > 0 else 1.
        return self.start + (self.end - self.start) * frac

    def before_train_iter(self, runner, batch_idx: int, data_batch=None):
        owner = self.get_owner(get_ori_model(runner.model))
        if not hasattr(owner, self.name):
            raise AttributeError(f'TeacherTempHook: the model has no '
                                 f'attribute {self.name!r}')
        setattr(owner, self.name,
                self.value(runner.iter, len(runner.train_dataloader)))
