from .layer_decay import LayerDecayOptimWrapperConstructor
from .per_tensor_clip import (AmpPerTensorClipOptimWrapper,
                              PerTensorClipOptimWrapper,
                              clip_grad_norm_per_tensor_)

__all__ = [
    'AmpPerTensorClipOptimWrapper', 'LayerDecayOptimWrapperConstructor',
    'PerTensorClipOptimWrapper', 'clip_grad_norm_per_tensor_'
]
