from .qbheat import QBHeat
from .cr2pq import CR2PQ
from .dinov2 import DINOv2
from .distill import Distill
from .droppos import DropPos, NaFlexDropPos
from .icpf import ICPF
from .naflex_mae import NaFlexMAE

__all__ = [
    'QBHeat', 'CR2PQ', 'DINOv2', 'Distill', 'DropPos', 'ICPF', 'NaFlexDropPos',
    'NaFlexMAE'
]
