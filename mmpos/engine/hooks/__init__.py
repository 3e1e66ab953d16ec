from .checkpoint_fit import CheckpointFitHook
from .dense_probes import OnlineDepthProbeHook, OnlineRetrievalProbeHook
from .dino_schedules_hook import TeacherTempHook
from .encoder_tokens import EncoderTokensHook
from .ema_teacher import EMATeacherHook
from .health_monitor import HealthMonitorHook
from .intact_checkpoint import IntactCheckpointHook
from .nonfinite_loss import NonFiniteLossError, NonFiniteLossHook
from .online_probe import OnlineProbeHook
from .preemption import PREEMPTED_EXIT_CODE, Preempted, PreemptionHook
from .rng_state import RNGStateHook

__all__ = [
    'CheckpointFitHook', 'EMATeacherHook',
    'EncoderTokensHook',
    'HealthMonitorHook', 'IntactCheckpointHook', 'NonFiniteLossError',
    'NonFiniteLossHook', 'OnlineDepthProbeHook', 'OnlineProbeHook',
    'OnlineRetrievalProbeHook', 'PREEMPTED_EXIT_CODE', 'Preempted',
    'PreemptionHook',
    'RNGStateHook', 'TeacherTempHook'
]
