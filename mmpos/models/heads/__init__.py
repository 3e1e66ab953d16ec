from .probe_heads import BNLinearClsHead, TransformerClsHead
from .qbheat_head import QBHeatHead
from .dino_projection_head import DINOProjectionHead
from .droppos_head import (DropPosHead, attentive_weights, droppos_loss,
                           position_accuracy, smoothed_position_targets)

__all__ = [
    'BNLinearClsHead', 'QBHeatHead', 'TransformerClsHead',
    'DINOProjectionHead', 'DropPosHead', 'attentive_weights', 'droppos_loss',
    'position_accuracy', 'smoothed_position_targets'
]
