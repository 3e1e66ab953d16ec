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

A file that is not a complete checkpoint (cut short by a killed save or a
full disk, empty, or not written by ``torch.save``) is refused before it is
unpickled, with :class:`~mmpos.utils.errors.CheckpointReadError` naming the
file and what is wrong (:func:`checkpoint_problem`).

Writes are atomic (:class:`AtomicLocalBackend`): mmengine saves checkpoints
through its local file backend, which mmpos replaces by one that writes a
temporary file in the same directory and renames it over the target, so a
save killed halfway or failing on a full disk never leaves a truncated
``iter_N.pth``; ``CheckpointHook`` writes ``last_checkpoint`` after the save
returns, i.e. only once the new file is complete.
"""
import os
import os.path as osp
import pickle
import tempfile
import zipfile
from pathlib import Path
from typing import Optional, Union

import torch
from mmengine.fileio import LocalBackend, io as mmengine_io, register_backend
from mmengine.logging import print_log
from mmengine.runner.checkpoint import CheckpointLoader

from .errors import BadInputError, CheckpointReadError

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


# The first bytes of torch.save's legacy (pre-1.6, non-zip) format: a
# protocol-2 pickle of its magic number.
LEGACY_MAGIC = pickle.dumps(torch.serialization.MAGIC_NUMBER, protocol=2)


class UnsafeCheckpointError(BadInputError, RuntimeError):
    """A checkpoint that needs arbitrary Python objects to be unpickled."""


def checkpoint_problem(filename) -> Optional[str]:
    """What makes ``filename`` unreadable as a checkpoint, or ``None``.

    Cheap: reads the zip directory (at the end of the file, so any
    truncation is seen) or the legacy format's first bytes, never the
    tensors.
    """
    filename = osp.expanduser(str(filename))
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
    """Raise :class:`CheckpointReadError` (``FileNotFoundError`` when
    missing) if :func:`checkpoint_problem` finds one; ``what`` names the
    option or key that gave the path."""
    problem = checkpoint_problem(filename)
    if problem == 'no such file':
        raise FileNotFoundError(f'{what} not found: {filename}')
    if problem:
        raise CheckpointReadError(f'{what} {filename} cannot be read: '
                                  f'{problem}')


def _load(filename, map_location, weights_only):
    """``torch.load`` with a read failure reported as bad input."""
    try:
        return torch.load(filename, map_location=map_location,
                          weights_only=weights_only)
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


def load_local_checkpoint(filename, map_location=None):
    """Load a local checkpoint as safely as its format allows (see module)."""
    filename = osp.expanduser(filename)
    check_checkpoint_file(filename)
    if zipfile.is_zipfile(filename):
        unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(
            filename)
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


def register_checkpoint_loader():
    """Make mmengine's Runner/``load_checkpoint`` use the loader above for
    local paths (called when ``mmpos`` is imported)."""
    CheckpointLoader.register_scheme(
        prefixes='', loader=load_local_checkpoint, force=True)


def write_atomically(data: bytes, path: Union[str, Path]) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same
    directory (flushed to disk, then renamed over ``path``): readers see the
    old file or the complete new one, never a partial one. The temporary
    file is removed when the write fails (e.g. ``ENOSPC``)."""
    path = osp.abspath(str(path))
    folder = osp.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f'.{osp.basename(path)}.',
                               suffix='.part', dir=folder)
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if osp.exists(tmp):
            os.remove(tmp)
        raise


class AtomicLocalBackend(LocalBackend):
    """mmengine's local file backend with :func:`write_atomically` for
    ``put`` / ``put_text`` (what ``Runner.save_checkpoint`` and
    ``mmengine.dump`` write through)."""

    def put(self, obj: bytes, filepath: Union[str, Path]) -> None:
        write_atomically(obj, filepath)

    def put_text(self, obj: str, filepath: Union[str, Path],
                 encoding: str = 'utf-8') -> None:
        write_atomically(obj.encode(encoding), filepath)


def register_atomic_local_backend():
    """Make :class:`AtomicLocalBackend` mmengine's backend for local paths
    (called when ``mmpos`` is imported); drops cached local backends."""
    register_backend('local', AtomicLocalBackend, force=True, prefixes='')
    for key, backend in list(mmengine_io.backend_instances.items()):
        if type(backend) is LocalBackend:
            del mmengine_io.backend_instances[key]
