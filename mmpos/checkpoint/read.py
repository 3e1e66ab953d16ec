"""Reading a checkpoint file: checked before unpickling, unpickled safely.

torch >= 2.6 loads with ``weights_only=True`` by default, which rejects the
checkpoints mmengine itself writes: their ``message_hub`` pickles
``HistoryBuffer`` objects (and method references through ``getattr``) and
numpy arrays. :func:`read_checkpoint`

1. refuses a path that is missing (``FileNotFoundError``), a directory
   (``IsADirectoryError``) or not a complete ``torch.save`` file
   (:class:`CheckpointReadError`: truncated by a killed save or a full
   disk, empty, another format; :func:`checkpoint_problem` reads only the
   zip directory, so nothing is unpickled);
2. loads plain state dicts (converted / pretrained backbones, the authors'
   and timm's releases; the ``argparse.Namespace`` that the DeiT/RoPE-ViT
   training scripts store is allowed) with ``weights_only=True``;
3. loads a file whose only other pickled globals are the ones mmengine's own
   training checkpoints contain (:data:`MMENGINE_CHECKPOINT_GLOBALS`, found
   with ``torch.serialization.get_unsafe_globals_in_checkpoint`` without
   unpickling anything) with ``weights_only=False``, and the log says so;
4. refuses anything else with :class:`UnsafeCheckpointError`, naming the
   unexpected globals.

:func:`state_dict_of` takes the ``name -> tensor`` mapping out of what was
read (``state_dict`` / ``model`` / ``ema_state_dict`` wrappers).
"""
import argparse
import os
import os.path as osp
import pickle
import zipfile
from typing import Dict, Optional, Sequence

import torch
from mmengine.logging import print_log
from torch import Tensor

from mmpos.errors import CheckpointReadError, UnsafeCheckpointError

StateDict = Dict[str, Tensor]

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
# Objects that weights_only=True may build besides tensors and containers.
WEIGHTS_ONLY_GLOBALS = (argparse.Namespace, )
_WEIGHTS_ONLY_NAMES = frozenset(f'{g.__module__}.{g.__qualname__}'
                                for g in WEIGHTS_ONLY_GLOBALS)

# The first bytes of torch.save's legacy (pre-1.6, non-zip) format: a
# protocol-2 pickle of its magic number.
LEGACY_MAGIC = pickle.dumps(torch.serialization.MAGIC_NUMBER, protocol=2)


def checkpoint_problem(filename) -> Optional[str]:
    """What makes ``filename`` unreadable as a checkpoint, or ``None``.

    Cheap: reads the zip directory (at the end of the file, so any
    truncation is seen) or the legacy format's first bytes, never the
    tensors. ``'no such file'`` and ``'a directory, not a file'`` name a
    path that is not a file.
    """
    filename = osp.expanduser(str(filename))
    if osp.isdir(filename):
        return 'a directory, not a file'
    if not osp.isfile(filename):
        return 'no such file'
    size = os.path.getsize(filename)
    if size == 0:
        return 'the file is empty (0 bytes)'
    if zipfile.is_zipfile(filename):
        try:
            with zipfile.ZipFile(filename) as archive:
                names = archive.namelist()
        except (zipfile.BadZipFile, OSError) as err:
            return f'a damaged zip archive ({err})'
        if not any(n == 'data.pkl' or n.endswith('/data.pkl')
                   for n in names):
            return 'a zip archive without data.pkl, not a torch.save file'
        return None
    with open(filename, 'rb') as f:
        head = f.read(len(LEGACY_MAGIC))
    if head == LEGACY_MAGIC:
        return None
    if head.startswith(b'PK'):
        return (f'truncated: a zip archive without its end ({size} bytes; '
                'an interrupted save or a full disk?)')
    return f'not a PyTorch checkpoint (starts with {head[:8]!r})'


def check_checkpoint_file(filename, what: str = 'checkpoint') -> None:
    """Raise if :func:`checkpoint_problem` finds one; ``what`` names the
    option or key that gave the path.

    Raises:
        FileNotFoundError: ``<what> not found: <path>``.
        IsADirectoryError: ``<what> <path> is a directory, not a file``.
        CheckpointReadError: ``<what> <path> cannot be read: <problem>``.
    """
    problem = checkpoint_problem(filename)
    if problem == 'no such file':
        raise FileNotFoundError(f'{what} not found: {filename}')
    if problem == 'a directory, not a file':
        raise IsADirectoryError(f'{what} {filename} is a directory, not a '
                                'checkpoint file')
    if problem:
        raise CheckpointReadError(f'{what} {filename} cannot be read: '
                                  f'{problem}')


def _load(filename, map_location, weights_only):
    """``torch.load`` with a read failure reported as bad input."""
    try:
        if weights_only:
            with torch.serialization.safe_globals(
                    list(WEIGHTS_ONLY_GLOBALS)):
                return torch.load(filename, map_location=map_location,
                                  weights_only=True)
        return torch.load(filename, map_location=map_location,
                          weights_only=False)
    except (RuntimeError, EOFError, pickle.UnpicklingError,
            zipfile.BadZipFile) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else ''
        if isinstance(err, pickle.UnpicklingError) and weights_only:
            raise UnsafeCheckpointError(
                f'refusing to load {filename}: {first}') from err
        raise CheckpointReadError(
            f'checkpoint {filename} cannot be read: {type(err).__name__}: '
            f'{first}') from err


def _is_mmengine_global(name: str) -> bool:
    return name in MMENGINE_CHECKPOINT_GLOBALS or name.startswith(
        _NUMPY_DTYPE_PREFIX)


def read_checkpoint(filename, what: str = 'checkpoint', map_location='cpu'):
    """The object in a local checkpoint file, read as safely as its format
    allows (see the module docstring); ``what`` names the option or key that
    gave the path in the messages."""
    filename = osp.expanduser(str(filename))
    check_checkpoint_file(filename, what)
    if zipfile.is_zipfile(filename):
        unsafe = [
            g for g in torch.serialization.get_unsafe_globals_in_checkpoint(
                filename) if g not in _WEIGHTS_ONLY_NAMES
        ]
    else:  # legacy format: only weights_only=True can read it safely
        unsafe = []
    if not unsafe:
        print_log(f'{filename} pickles no Python objects: loading it with '
                  'torch.load(weights_only=True)', logger='current')
        return _load(filename, map_location, weights_only=True)
    unexpected = sorted(g for g in unsafe if not _is_mmengine_global(g))
    if unexpected:
        raise UnsafeCheckpointError(
            f'refusing to load {filename}: it pickles Python objects other '
            f'than an mmengine training checkpoint does: {unexpected}')
    print_log(
        f'{filename} is an mmengine training checkpoint (message hub with '
        'HistoryBuffer/numpy objects): loading it with weights_only=False; '
        'load only checkpoints you trust', logger='current')
    return _load(filename, map_location, weights_only=False)


def state_dict_of(checkpoint,
                  keys: Sequence[str] = ('state_dict', 'model'),
                  source: str = 'the checkpoint') -> StateDict:
    """The ``name -> tensor`` mapping inside ``checkpoint``: under the first
    of ``keys`` it has, else ``checkpoint`` itself when every value is a
    tensor. Non-tensor entries of a wrapped state dict are left out.

    Raises:
        CheckpointReadError: naming ``source``, what it holds instead.
    """
    if isinstance(checkpoint, dict):
        for key in keys:
            if isinstance(checkpoint.get(key), dict):
                return {k: v for k, v in checkpoint[key].items()
                        if isinstance(v, Tensor)}
        if checkpoint and all(isinstance(v, Tensor)
                              for v in checkpoint.values()):
            return dict(checkpoint)
        found = f'a dict with keys {sorted(checkpoint)[:8]}'
    else:
        found = f'a {type(checkpoint).__name__}'
    raise CheckpointReadError(
        f'{source} holds {found}, not a state dict (expected one of '
        f'{list(keys)} or a flat name -> tensor mapping)')


def read_state_dict(filename, what: str = 'checkpoint',
                    keys: Sequence[str] = ('state_dict', 'model')
                    ) -> StateDict:
    """:func:`state_dict_of` :func:`read_checkpoint` ``(filename)``."""
    return state_dict_of(read_checkpoint(filename, what), keys,
                         f'{what} {filename}')
