"""mmpos: position-aware self-supervised pretraining for OpenMMLab.

Importing the package registers all of its modules into mmpretrain's
registries (see :mod:`mmpos.registry`).
"""
from .version import __version__
from . import datasets, engine, evaluation, models  # noqa: F401,E402  (registration)

__all__ = ['__version__']
