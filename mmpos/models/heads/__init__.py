from .dino_head import DINOHead

__all__ = ['DINOHead']
