"""Writing files atomically, with the mode a plain ``open()`` gives.

:func:`atomic_open` (a file object) and :func:`atomic_path` (a file name,
for writers that take one) write through a hidden temporary file in the
target's directory (``.<name>.<random>.part``), flushed to disk and renamed
over the target: readers see the old file or the complete new one, never a partial
one, and a failed write (a kill, ``ENOSPC``) leaves no partial file. The
temporary file is created with ``os.open(..., 0o666)``, so the kernel
applies the user's umask exactly as for ``open(path, 'w')`` (``0644``
under the usual umask ``022``), and a colleague can read a shared
checkpoint.

:class:`AtomicLocalBackend` is mmengine's local file backend with these
writes (what ``Runner.save_checkpoint``, ``CheckpointHook``'s
``last_checkpoint`` and ``mmengine.dump`` write through); mmpos' tools make
it the backend of local paths with :func:`mmpos.checkpoint.use_safe_io`.
"""
import contextlib
import errno
import os
import os.path as osp
import secrets
import shutil
from pathlib import Path
from typing import Optional, Union

import torch
from mmengine.fileio import LocalBackend

from .read import StateDict


@contextlib.contextmanager
def atomic_path(path: Union[str, Path]):
    """``with atomic_path(path) as tmp:`` a temporary path beside ``path``
    (an empty file, mode as ``open()`` would give it) for a writer that
    takes a file name (``torch.onnx.export``); synced and renamed to
    ``path`` when the block ends without an exception, removed otherwise.
    """
    path = osp.abspath(str(path))
    folder = osp.dirname(path)
    os.makedirs(folder, exist_ok=True)
    while True:
        tmp = osp.join(folder, f'.{osp.basename(path)}.'
                       f'{secrets.token_hex(4)}.part')
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                             0o666))
            break
        except FileExistsError:
            continue
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        if osp.exists(tmp):
            os.remove(tmp)
        raise


@contextlib.contextmanager
def atomic_open(path: Union[str, Path]):
    """``with atomic_open(path) as f:`` a binary file object that becomes
    ``path`` when the block ends without an exception (see
    :func:`atomic_path`)."""
    with atomic_path(path) as tmp, open(tmp, 'wb') as f:
        yield f
        f.flush()


def write_atomically(data: bytes, path: Union[str, Path]) -> None:
    """Write ``data`` to ``path`` through :func:`atomic_open`.

    Raises:
        OSError: a full disk or quota (``ENOSPC``, ``EDQUOT``) as an
            ``OSError`` of the same errno naming ``path``, the bytes the
            file needs and those free on its file system; ``path`` is left
            as it was.
    """
    try:
        with atomic_open(path) as f:
            f.write(data)
    except OSError as err:
        if err.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        free = shutil.disk_usage(osp.dirname(osp.abspath(path))).free
        raise OSError(
            err.errno, f'{err.strerror}: the file needs {len(data):,} bytes, '
            f'{free:,} are free there', str(path)) from err


def save_state_dict(state_dict: StateDict,
                    path: str,
                    meta: Optional[dict] = None,
                    force: bool = False) -> None:
    """Write ``{'state_dict': ..., 'meta': ...}`` atomically (loadable with
    ``weights_only=True``; ``meta`` must hold plain values only).

    Raises:
        FileExistsError: ``path`` exists and not ``force``.
    """
    if osp.exists(path) and not force:
        raise FileExistsError(f'{path} exists; pass --force to overwrite it')
    with atomic_open(path) as f:
        torch.save(dict(state_dict=dict(state_dict), meta=meta or {}), f)


class AtomicLocalBackend(LocalBackend):
    """mmengine's local file backend with :func:`write_atomically` for
    ``put`` / ``put_text``."""

    def put(self, obj: bytes, filepath: Union[str, Path]) -> None:
        write_atomically(obj, filepath)

    def put_text(self, obj: str, filepath: Union[str, Path],
                 encoding: str = 'utf-8') -> None:
        write_atomically(obj.encode(encoding), filepath)
