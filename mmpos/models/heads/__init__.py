from .probe_heads import BNLinearClsHead, TransformerClsHead
from .dino_projection_head import DINOProjectionHead

__all__ = ['BNLinearClsHead', 'TransformerClsHead', 'DINOProjectionHead']
