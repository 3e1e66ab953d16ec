"""DINOv2 (algorithm, :mod:`.dinov2`; on NaFlex views,
:mod:`.naflex_dinov2`). Its projection head, losses and
teacher-temperature hook are shared with ICPF and stay in
``mmpos/models/heads``, ``mmpos/models/losses`` and
``mmpos/engine/hooks``."""
from .dinov2 import DINOv2
from .naflex_dinov2 import NaFlexDINOv2

__all__ = ['DINOv2', 'NaFlexDINOv2']
