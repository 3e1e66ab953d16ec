"""mmpos: position-aware self-supervised pretraining for OpenMMLab.

Importing the package registers all of its modules into mmpretrain's
registries (see :mod:`mmpos.registry`) and makes mmengine load local
checkpoints with ``weights_only=True`` where their format allows and write
them atomically (see :mod:`mmpos.utils.checkpoint_io`).
"""
from .version import __version__
from . import datasets, engine, evaluation, models  # noqa: F401,E402  (registration)
from .utils.checkpoint_io import (register_atomic_local_backend,
                                  register_checkpoint_loader)

register_checkpoint_loader()
register_atomic_local_backend()

__all__ = ['__version__']
