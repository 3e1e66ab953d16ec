from .checkpoint_fit import CheckpointFitHook
from .dino_schedules_hook import TeacherTempHook
from .droppos_sigma_hook import DropPosSigmaHook
from .ema_teacher import EMATeacherHook
from .health_monitor import HealthMonitorHook
from .nonfinite_loss import NonFiniteLossError, NonFiniteLossHook
from .online_probe import OnlineProbeHook
from .rng_state import RNGStateHook

__all__ = [
    'CheckpointFitHook', 'DropPosSigmaHook', 'EMATeacherHook', 'HealthMonitorHook',
    'NonFiniteLossError', 'NonFiniteLossHook', 'OnlineProbeHook',
    'RNGStateHook', 'TeacherTempHook'
]
