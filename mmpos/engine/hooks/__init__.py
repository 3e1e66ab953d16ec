from .dino_schedules_hook import TeacherTempHook
from .nonfinite_loss import NonFiniteLossError, NonFiniteLossHook

__all__ = ['NonFiniteLossError', 'NonFiniteLossHook', 'TeacherTempHook']
