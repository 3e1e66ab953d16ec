from .layer_decay import LayerDecayOptimWrapperConstructor

__all__ = ['LayerDecayOptimWrapperConstructor']
