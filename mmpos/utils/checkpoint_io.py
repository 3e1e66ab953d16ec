"""Loading local checkpoints with ``torch.load(weights_only=True)`` first.

torch >= 2.6 loads with ``weights_only=True`` by default, which rejects the
checkpoints mmengine itself writes: their ``message_hub`` pickles
``HistoryBuffer`` objects (and method references through ``getattr``) and
numpy arrays. mmpos replaces mmengine's loader for local paths with
:func:`load_local_checkpoint`:

1. plain state dicts (converted/pretrained backbones) load with
   ``weights_only=True``;
2. a file whose only non-tensor globals are the ones mmengine's own training
   checkpoints contain (listed in :data:`MMENGINE_CHECKPOINT_GLOBALS`, found
   with ``torch.serialization.get_unsafe_globals_in_checkpoint`` without
   unpickling anything) is loaded with ``weights_only=False`` and the log says
   so;
3. anything else is refused, naming the unexpected globals.
"""
import os.path as osp

import torch
from mmengine.logging import print_log
from mmengine.runner.checkpoint import CheckpointLoader

MMENGINE_CHECKPOINT_GLOBALS = frozenset({
    'builtins.getattr',
    'collections.OrderedDict',
    'mmengine.logging.history_buffer.HistoryBuffer',
    'numpy.dtype',
    'numpy.ndarray',
    'numpy.core.multiarray._reconstruct',
    'numpy.core.multiarray.scalar',
    'numpy._core.multiarray._reconstruct',
    'numpy._core.multiarray.scalar',
})
_NUMPY_DTYPE_PREFIX = 'numpy.dtypes.'


class UnsafeCheckpointError(RuntimeError):
    """A checkpoint that needs arbitrary Python objects to be unpickled."""


def _is_mmengine_global(name: str) -> bool:
    return name in MMENGINE_CHECKPOINT_GLOBALS or name.startswith(
        _NUMPY_DTYPE_PREFIX)


def load_local_checkpoint(filename, map_location=None):
    """Load a local checkpoint as safely as its format allows (see module)."""
    filename = osp.expanduser(filename)
    if not osp.isfile(filename):
        raise FileNotFoundError(f'checkpoint not found: {filename}')
    unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(filename)
    if not unsafe:
        print_log(f'{filename} pickles no Python objects: loading it with '
                  'torch.load(weights_only=True)', logger='current')
        return torch.load(filename, map_location=map_location,
                          weights_only=True)
    unexpected = sorted(g for g in unsafe if not _is_mmengine_global(g))
    if unexpected:
        raise UnsafeCheckpointError(
            f'refusing to load {filename}: it pickles Python objects other '
            f'than an mmengine training checkpoint does: {unexpected}')
    print_log(
        f'{filename} is an mmengine training checkpoint (message hub with '
        'HistoryBuffer/numpy objects): loading it with weights_only=False; '
        'load only checkpoints you trust', logger='current')
    return torch.load(filename, map_location=map_location, weights_only=False)


def register_checkpoint_loader():
    """Make mmengine's Runner/``load_checkpoint`` use the loader above for
    local paths (called when ``mmpos`` is imported)."""
    CheckpointLoader.register_scheme(
        prefixes='', loader=load_local_checkpoint, force=True)
