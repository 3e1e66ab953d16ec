from .dino_schedules_hook import TeacherTempHook
from .droppos_sigma_hook import DropPosSigmaHook
from .nonfinite_loss import NonFiniteLossError, NonFiniteLossHook

__all__ = [
    'DropPosSigmaHook', 'NonFiniteLossError', 'NonFiniteLossHook',
    'TeacherTempHook'
]
