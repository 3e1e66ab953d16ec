"""mini-stuff: semantic segmentation whose regions differ by material.

Each image is a Voronoi partition overlaid by a few ellipses and bands
(the geometry of :mod:`.ade`); every region is filled with one material of
:data:`~.materials.MINI_MATERIALS`, jittered alike for all materials (colour
separates only some; the grey ones differ by texture). Label maps are uint8 PNGs
with the material index (0..7) and 255 (ignore) on the 1.5-pixel seams
between Voronoi cells; read by :class:`mmpos_harness.mini_data.datasets.
MiniStuffDataset`.
"""
import os.path as osp

import numpy as np

from ._io import _STUFF, _check_sizes, _rng, _seg_split, _staged_splits
from .ade import _ade_region
from .materials import MINI_MATERIALS, PhotoBank, _paint
from .textures import _grid, _to_uint8

IGNORE_INDEX = 255


def _stuff_label_map(rng, size):
    """Material index per pixel (uint8, (size, size)): 2..5 Voronoi cells,
    255 on their seams, then 1..3 ellipses or bands."""
    xs, ys = _grid(size)
    num_cells = int(rng.integers(2, 6))
    seeds = rng.uniform(0, size, (num_cells, 2))
    dist = np.hypot(xs[..., None] - seeds[:, 0], ys[..., None] - seeds[:, 1])
    order = np.sort(dist, axis=-1)
    labels = rng.integers(0, len(MINI_MATERIALS), num_cells)[dist.argmin(-1)]
    if num_cells > 1:
        labels[order[..., 1] - order[..., 0] < 1.5] = IGNORE_INDEX
    for _ in range(int(rng.integers(1, 4))):
        labels[_ade_region(rng, xs, ys, size)] = rng.integers(
            len(MINI_MATERIALS))
    return labels.astype(np.uint8)


def _render_stuff(rng, bank, labels):
    """Image for a label map: each material present painted where it is
    (seams take a neighbour's texture), uint8 (H, W, 3)."""
    size = labels.shape[0]
    names = list(MINI_MATERIALS)
    present = [int(c) for c in np.unique(labels) if c != IGNORE_INDEX]
    img = np.zeros((size, size, 3), np.float32)
    seams = labels == IGNORE_INDEX
    for i, c in enumerate(present):
        fill = _paint(rng, bank.patch(rng, MINI_MATERIALS[names[c]], size))
        where = (labels == c) | (seams if i == 0 else False)
        img[where] = fill[where]
    img += 3 * rng.standard_normal(img.shape).astype(np.float32)
    return _to_uint8(img)


def make_mini_stuff(root, num_train=32, num_val=32, img_size=64, seed=0,
                    force=False):
    """Write the mini-stuff segmentation dataset to ``root``.

    Layout ``images/{train,val}/*.jpg`` and ``annotations/{train,val}/
    *.png``; classes are the keys of :data:`~.materials.MINI_MATERIALS`.

    Args:
        root (str): Target directory (must be absent or empty unless
            ``force``).
        num_train (int): Training images.
        num_val (int): Validation images.
        img_size (int): Side of the square images, >= 32.
        seed (int): Seed of all randomness.
        force (bool): Replace an existing mini-data directory at ``root``.

    Returns:
        str: The absolute path of the dataset (its ``data_root``).
    """
    _check_sizes(img_size, num_train=num_train, num_val=num_val)
    bank = PhotoBank(MINI_MATERIALS.values())
    with _staged_splits(root, force, 'stuff', num_train, num_val, img_size,
                        seed) as tmp:
        for split, num in (('train', num_train), ('val', num_val)):

            def draw(index):
                rng = _rng(seed, _STUFF, split == 'val', index)
                labels = _stuff_label_map(rng, img_size)
                return _render_stuff(rng, bank, labels), labels

            _seg_split(tmp, split, num, draw, lambda index: f'{index:05d}')
    return osp.abspath(root)
