"""Layer-wise learning-rate decay for detectors and segmentors.

mmpretrain's ``LearningRateDecayOptimWrapperConstructor`` asks the *model*
for ``get_layer_depth``; its classifiers have one, mmdet's and mmseg's models
do not. This subclass falls back to the backbone's ``get_layer_depth`` with
the ``backbone.`` prefix, so neck and head parameters are treated as the last
layer (scale 1) and ViT block ``i`` gets ``rate ** (num_layers - i)``.
"""
import torch.nn as nn
from mmpretrain.engine.optimizers import \
    LearningRateDecayOptimWrapperConstructor

from mmpos.registry import OPTIM_WRAPPER_CONSTRUCTORS


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class LayerDecayOptimWrapperConstructor(
        LearningRateDecayOptimWrapperConstructor):
    """Use as ``constructor='mmpretrain.LayerDecayOptimWrapperConstructor'``
    in mmdet/mmseg configs (plain name in mmpretrain-scope configs), with
    ``paramwise_cfg=dict(layer_decay_rate=...)``."""

    def add_params(self, params, module: nn.Module, prefix='',
                   get_layer_depth=None, **kwargs):
        if get_layer_depth is None and not hasattr(module, 'get_layer_depth'):
            backbone = getattr(module, 'backbone', None)
            if backbone is None or not hasattr(backbone, 'get_layer_depth'):
                raise TypeError(
                    f'{type(module).__name__} has no get_layer_depth and no '
                    'backbone with one; layer-wise lr decay needs a ViT '
                    'backbone such as RoPEVisionTransformer')

            def get_layer_depth(name):
                return backbone.get_layer_depth(name, prefix='backbone.')

        super().add_params(params, module, prefix, get_layer_depth, **kwargs)
