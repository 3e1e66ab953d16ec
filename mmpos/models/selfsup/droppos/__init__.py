"""DropPos: the algorithm (:mod:`.droppos`), its position decoder and loss
(:mod:`.droppos_head`), the smoothing schedule hook
(:mod:`.droppos_sigma_hook`) and DropPos on NaFlex batches
(:mod:`.naflex_droppos`)."""
from .droppos import DropPos
from .droppos_head import (DropPosHead, attentive_weights, droppos_loss,
                           position_accuracy, smoothed_position_targets)
from .droppos_sigma_hook import DropPosSigmaHook
from .naflex_droppos import NaFlexDropPos, NaFlexDropPosHead

__all__ = ['DropPos', 'DropPosHead', 'DropPosSigmaHook', 'NaFlexDropPos',
           'NaFlexDropPosHead', 'attentive_weights', 'droppos_loss',
           'position_accuracy', 'smoothed_position_targets']
