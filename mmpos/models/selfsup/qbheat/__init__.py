"""QB-Heat: the algorithm (:mod:`.qbheat`), its linear heat predictor neck
(:mod:`.qbheat_predictor`) and pixel decoder head (:mod:`.qbheat_head`)."""
from .qbheat import QBHeat
from .qbheat_head import QBHeatHead
from .qbheat_predictor import QBHeatPredictor

__all__ = ['QBHeat', 'QBHeatHead', 'QBHeatPredictor']
