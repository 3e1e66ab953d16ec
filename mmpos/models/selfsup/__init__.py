from .dinov2 import DINOv2
from .icpf import ICPF

__all__ = ['DINOv2', 'ICPF']
