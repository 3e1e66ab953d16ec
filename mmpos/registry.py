"""mmpos registers everything into mmpretrain's registries.

Modules defined here are therefore built by any config whose ``default_scope``
is ``'mmpretrain'``; mmdet and mmseg configs refer to them with the scope
prefix, e.g. ``backbone=dict(type='mmpretrain.RoPEVisionTransformer')``. A
config makes them available with::

    custom_imports = dict(imports=['mmpos'], allow_failed_imports=False)
"""
from mmengine.registry import Registry
from mmpretrain.registry import (DATA_SAMPLERS, DATASETS, EVALUATORS, HOOKS,
                                 METRICS, MODELS, OPTIM_WRAPPER_CONSTRUCTORS,
                                 OPTIM_WRAPPERS, OPTIMIZERS, PARAM_SCHEDULERS,
                                 TRANSFORMS)

#: position schemes (:class:`~mmpos.models.layers.positions.PositionScheme`),
#: built from a backbone's ``rope=dict(type=...)``
POSITION_ENCODINGS = Registry('position encoding',
                              locations=['mmpos.models.layers.positions'])

__all__ = [
    'POSITION_ENCODINGS',
    'DATA_SAMPLERS', 'DATASETS', 'EVALUATORS', 'HOOKS', 'METRICS', 'MODELS',
    'OPTIM_WRAPPER_CONSTRUCTORS', 'OPTIM_WRAPPERS', 'OPTIMIZERS',
    'PARAM_SCHEDULERS', 'TRANSFORMS'
]
