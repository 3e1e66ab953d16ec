from .qbheat_predictor import QBHeatPredictor
from .cr2pq_neck import CR2PQNeck, RoPECrossAttention
from .vit_pyramids import DeconvMultiLevelNeck, SimpleFeaturePyramid

__all__ = [
    'QBHeatPredictor',
    'CR2PQNeck', 'DeconvMultiLevelNeck', 'RoPECrossAttention',
    'SimpleFeaturePyramid'
]
