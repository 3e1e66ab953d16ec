"""DINOv2 (algorithm, :mod:`.dinov2`). Its projection head, losses and
teacher-temperature hook are shared with ICPF and stay in
``mmpos/models/heads``, ``mmpos/models/losses`` and
``mmpos/engine/hooks``."""
from .dinov2 import DINOv2

__all__ = ['DINOv2']
