from .rope_swin import RoPESwinTransformer, RoPEWindowMSA
from .rope_vit import RoPETransformerEncoderLayer, RoPEVisionTransformer

__all__ = [
    'RoPESwinTransformer', 'RoPETransformerEncoderLayer',
    'RoPEVisionTransformer', 'RoPEWindowMSA'
]
