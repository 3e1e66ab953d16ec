from .rope_vit import RoPETransformerEncoderLayer, RoPEVisionTransformer

__all__ = ['RoPETransformerEncoderLayer', 'RoPEVisionTransformer']
