"""DropPos: the algorithm (:mod:`.droppos`), its position decoder and loss
(:mod:`.droppos_head`) and the smoothing schedule hook
(:mod:`.droppos_sigma_hook`)."""
from .droppos import DropPos
from .droppos_head import (DropPosHead, attentive_weights, droppos_loss,
                           position_accuracy, smoothed_position_targets)
from .droppos_sigma_hook import DropPosSigmaHook

__all__ = ['DropPos', 'DropPosHead', 'DropPosSigmaHook', 'attentive_weights',
           'droppos_loss', 'position_accuracy', 'smoothed_position_targets']
