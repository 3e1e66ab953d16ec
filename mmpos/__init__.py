"""mmpos: position-aware self-supervised pretraining for OpenMMLab.

Importing the package registers its modules into mmpretrain's registries
(see :mod:`mmpos.registry`) and changes nothing else: mmengine's checkpoint
loaders and file backends stay as they are. mmpos' own tools make mmengine
read checkpoints safely and write them atomically by calling
:func:`mmpos.checkpoint.use_safe_io` at start-up.
"""
from .version import __version__
from . import datasets, engine, evaluation, models  # noqa: F401,E402  (registration)

__all__ = ['__version__']
