"""Shared plumbing of the mini-data generators: atomic, marker-guarded
output directories, JPEG writing, argument checks and random streams."""
import contextlib
import json
import os
import os.path as osp
import shutil
import tempfile

import numpy as np
from PIL import Image

MARKER = '.mini_data.json'
JPEG_QUALITY = 95

# Per-generator tags that keep the random streams of the datasets apart.
_COCO, _ADE, _UNLABELED, _CLS, _OBJECTS, _STUFF = 1, 2, 3, 4, 5, 6


def _check_parent(parent):
    """Raise a clear error if ``parent`` cannot hold a new directory."""
    probe = parent
    while not osp.exists(probe):
        probe = osp.dirname(probe)
    if not osp.isdir(probe):
        raise NotADirectoryError(
            f'cannot create {parent}: {probe} is not a directory')
    if not os.access(probe, os.W_OK | os.X_OK):
        raise PermissionError(f'cannot write to {probe}: permission denied')
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as err:
        raise PermissionError(
            f'cannot create {parent}: {err.strerror}') from err


def _check_target(root, force):
    """Raise if writing ``root`` would clobber something it should not."""
    if not osp.exists(root):
        return
    if not osp.isdir(root):
        raise FileExistsError(f'{root} exists and is not a directory')
    if not os.listdir(root):
        return
    if not force:
        raise FileExistsError(
            f'{root} is not empty; choose another directory or pass '
            'force=True (--force) to replace it')
    if not osp.isfile(osp.join(root, MARKER)):
        raise FileExistsError(
            f'{root} is not empty and was not written by mmpos mini_data '
            f'(no {MARKER}); refusing to replace it even with force')


#: the marker entries that count images; ``force`` never lowers one
COUNTS = ('num_train', 'num_val', 'num_images')


def written_with(root):
    """The arguments recorded in ``root``'s :data:`MARKER` (``None`` when
    ``root`` holds no mini dataset)."""
    try:
        with open(osp.join(root, MARKER)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def changed_arguments(root, wanted):
    """``{key: (written, wanted)}`` of the marker entries of ``root`` that
    differ from ``wanted`` (empty: written with these arguments); ``None``
    when ``root`` holds no mini dataset."""
    written = written_with(root)
    if written is None:
        return None
    return {k: (written.get(k), v) for k, v in wanted.items()
            if written.get(k) != v}


def plan_target(root, wanted, force):
    """``True`` when ``root`` must be (re)written for the arguments
    ``wanted`` (a dict of marker entries), ``False`` when the dataset there
    was written with exactly these arguments (a re-run is a no-op).

    Raises ``FileExistsError`` when ``root`` holds other data and ``force``
    is not given, and, even with ``force``, when replacing it would lower an
    image count (another page or study may rely on those images; remove the
    folder yourself to shrink it)."""
    changed = changed_arguments(root, wanted)
    if changed is not None:
        if not changed:
            return False
        what = ', '.join(f'{k} {old} -> {new}'
                         for k, (old, new) in sorted(changed.items()))
        if not force:
            raise FileExistsError(
                f'{root} holds a mini dataset written with other arguments '
                f'({what}); pass --force to rewrite it, or choose another '
                'directory')
        fewer = sorted(k for k, (old, new) in changed.items()
                       if k in COUNTS and old is not None and new < old)
        if fewer:
            raise FileExistsError(
                f'--force would shrink {root} ({what}): the larger set may '
                'be what another guide or study reads; remove the folder '
                'yourself to shrink it, or choose another directory')
    _check_target(root, force)
    return True


def _mkdtemp(parent, name, suffix):
    """Hidden temporary directory in ``parent`` with umask permissions."""
    path = tempfile.mkdtemp(prefix=f'.{name}.', suffix=suffix, dir=parent)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o777 & ~umask)
    return path


def _swap_in(tmp, root):
    """Rename ``tmp`` to ``root``; an existing ``root`` is removed after."""
    if not (osp.isdir(root) and os.listdir(root)):
        os.replace(tmp, root)  # absent or empty target: one atomic rename
        return
    old = _mkdtemp(osp.dirname(root), osp.basename(root), '.old')
    os.replace(root, old)
    try:
        os.replace(tmp, root)
    except OSError:
        os.replace(old, root)
        raise
    shutil.rmtree(old)


@contextlib.contextmanager
def _staged_dir(root, force, params):
    """Yield a temporary directory that becomes ``root`` on success.

    ``params`` (JSON-serialisable) is written to the :data:`MARKER` file.
    On any error the temporary directory is removed and ``root`` is left
    exactly as it was.
    """
    root = osp.abspath(root)
    _check_target(root, force)
    parent = osp.dirname(root)
    _check_parent(parent)
    tmp = _mkdtemp(parent, osp.basename(root), '.tmp')
    try:
        yield tmp
        _write_json(osp.join(tmp, MARKER), params)
        _swap_in(tmp, root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _staged_splits(root, force, dataset, num_train, num_val, img_size, seed,
                   **extra):
    """:func:`_staged_dir` of a dataset with a train and a val split, the
    generator's arguments (``extra`` last) as the marker's content."""
    return _staged_dir(
        root, force,
        dict(dataset=dataset, num_train=num_train, num_val=num_val,
             img_size=img_size, seed=seed, **extra))


def _write_json(path, obj):
    with open(path, 'w') as f:
        json.dump(obj, f)


def _save_jpeg(img, path):
    Image.fromarray(img).save(path, quality=JPEG_QUALITY)


def _check_sizes(img_size, **counts):
    """Validate the size arguments shared by the generators."""
    if int(img_size) != img_size or img_size < 32:
        raise ValueError(f'img_size must be an integer >= 32, got {img_size}')
    for name, value in counts.items():
        if int(value) != value or value < 1:
            raise ValueError(f'{name} must be an integer >= 1, got {value}')


def _rng(seed, *keys):
    """Independent generator for one (dataset, split, image) stream."""
    return np.random.default_rng([seed, *keys])


def _seg_split(root, split, num, draw, stem):
    """Write ``images/<split>/<stem(i)>.jpg`` and the uint8 label map
    ``annotations/<split>/<stem(i)>.png`` of ``draw(i) -> (img, labels)``
    for ``i < num``."""
    img_dir = osp.join(root, 'images', split)
    ann_dir = osp.join(root, 'annotations', split)
    os.makedirs(img_dir)
    os.makedirs(ann_dir)
    for index in range(num):
        img, labels = draw(index)
        _save_jpeg(img, osp.join(img_dir, stem(index) + '.jpg'))
        Image.fromarray(labels).save(osp.join(ann_dir, stem(index) + '.png'))
