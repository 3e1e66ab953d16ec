"""Safe checkpoint reads and atomic writes for mmengine's Runner, on request.

``import mmpos`` changes nothing of mmengine's state: a user's own mmdet /
mmseg / mmpretrain tools that import mmpos (``custom_imports``) behave
exactly as without it. mmpos' own tools (``tools/train.py``,
``tools/test.py``, ``tools/infer.py``) call :func:`use_safe_io` once at
start-up, through mmengine's registration API:

* ``CheckpointLoader.register_scheme`` makes :func:`~mmpos.checkpoint.read.
  read_checkpoint` the loader of local paths (``load_from``, ``--resume``,
  ``init_cfg`` of non-mmpos modules), i.e. ``weights_only=True`` where the
  format allows and truncation reported before unpickling;
* ``register_backend`` makes :class:`~mmpos.checkpoint.write.
  AtomicLocalBackend` the file backend of local paths, so checkpoints,
  ``last_checkpoint`` and dumped metrics are written atomically with the
  user's umask.
"""
from mmengine.fileio import LocalBackend, io as mmengine_io, register_backend
from mmengine.runner.checkpoint import CheckpointLoader

from .read import read_checkpoint
from .write import AtomicLocalBackend


def _load_local(filename, map_location=None):
    """mmengine's loader signature over :func:`read_checkpoint`."""
    return read_checkpoint(filename, map_location=map_location)


def use_safe_io() -> None:
    """Make this process' mmengine read local checkpoints with
    :func:`~mmpos.checkpoint.read.read_checkpoint` and write local files
    with :class:`~mmpos.checkpoint.write.AtomicLocalBackend` (see the
    module docstring). Idempotent; for tools and tests, never called on
    import."""
    CheckpointLoader.register_scheme(prefixes='', loader=_load_local,
                                     force=True)
    register_backend('local', AtomicLocalBackend, force=True, prefixes='')
    for key, backend in list(mmengine_io.backend_instances.items()):
        if type(backend) is LocalBackend:  # cached before the call
            del mmengine_io.backend_instances[key]
