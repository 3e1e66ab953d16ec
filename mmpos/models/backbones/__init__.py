from .mae_rope_vit import MAERoPEViT
from .mobile_former import MobileFormer
from .pixel_patches import PixelPatches
from .rope_swin import RoPESwinTransformer, RoPEWindowMSA
from .rope_vit import RoPETransformerEncoderLayer, RoPEVisionTransformer

__all__ = [
    'MAERoPEViT', 'MobileFormer', 'PixelPatches',
    'RoPESwinTransformer', 'RoPETransformerEncoderLayer',
    'RoPEVisionTransformer', 'RoPEWindowMSA'
]
