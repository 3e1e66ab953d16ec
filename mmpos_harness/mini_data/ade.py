"""mini-ADE: ADE20K-layout semantic segmentation of Voronoi cells, each
class with its own colour and texture statistics."""
import os.path as osp

import numpy as np

from ._io import _ADE, _check_sizes, _rng, _seg_split, _staged_splits
from .textures import _grid, _smooth_noise, _stripes, _to_uint8

# Label-map ids used in mini-ADE and the ADE20K class each one stands for.
MINI_ADE_CLASSES = {
    1: 'wall',
    2: 'building',
    3: 'sky',
    4: 'floor',
    5: 'tree',
    6: 'ceiling'
}


def _ade_textures(rng, size):
    """One texture per label 0..6, float32 (7, H, W, 3).

    Each class has its own colour and texture statistic: smooth (wall),
    brick grid (building), vertical gradient (sky), fine horizontal
    stripes (floor), strong blotches (tree), tiles (ceiling); label 0 is
    random-coloured clutter.
    """
    xs, ys = _grid(size)
    flat = np.zeros((size, size), np.float32)
    brick = (np.mod(ys, 8) < 1.5) | (
        np.mod(xs + 8 * (np.floor(ys / 8) % 2), 16) < 1.5)
    tiles = (np.mod(xs, 16) < 1.5) | (np.mod(ys, 16) < 1.5)
    clutter_cells = rng.uniform(0, 255, (size // 8 + 1, size // 8 + 1, 3))
    clutter = np.kron(clutter_cells, np.ones((8, 8, 1)))[:size, :size]
    specs = [
        (np.zeros(3), flat),  # 0: replaced by clutter below
        ((205, 185, 140), flat),
        ((160, 75, 55), -70 * brick),
        ((100, 150, 235), 60 * (0.5 - ys / size)),
        ((170, 125, 60), 25 * _stripes(rng, size, 4.0, angle=np.pi / 2)),
        ((45, 125, 40), 45 * _smooth_noise(rng, size, size // 6)),
        ((230, 230, 225), -60 * tiles),
    ]
    textures = np.stack([
        np.asarray(colour, np.float32) + pattern[..., None]
        for colour, pattern in specs
    ])
    textures[0] = clutter
    return textures


def _ade_label_map(rng, size):
    """Random label map: Voronoi cells of classes 1..6 with 0-labelled
    seams, overlaid by a few ellipses and bands (some labelled 0)."""
    xs, ys = _grid(size)
    num_cells = int(rng.integers(3, 7))
    seeds = rng.uniform(0, size, (num_cells, 2))
    dist = np.hypot(xs[..., None] - seeds[:, 0], ys[..., None] - seeds[:, 1])
    order = np.sort(dist, axis=-1)
    cell_labels = rng.integers(1, len(MINI_ADE_CLASSES) + 1, num_cells)
    labels = cell_labels[dist.argmin(-1)]
    labels[order[..., 1] - order[..., 0] < 1.5] = 0
    for _ in range(int(rng.integers(1, 4))):
        label = 0 if rng.random() < 0.25 else rng.integers(
            1, len(MINI_ADE_CLASSES) + 1)
        labels[_ade_region(rng, xs, ys, size)] = label
    return labels.astype(np.uint8)


def _ade_region(rng, xs, ys, size):
    """A random rotated ellipse or straight band, boolean (H, W)."""
    angle = rng.uniform(0, np.pi)
    cx, cy = rng.uniform(0, size, 2)
    u = (xs - cx) * np.cos(angle) + (ys - cy) * np.sin(angle)
    v = -(xs - cx) * np.sin(angle) + (ys - cy) * np.cos(angle)
    if rng.random() < 0.5:
        return np.abs(v) < rng.uniform(0.05, 0.15) * size
    a, b = rng.uniform(0.1, 0.3, 2) * size
    return (u / a)**2 + (v / b)**2 <= 1


def _render_ade(rng, labels):
    """Image for a label map: class textures, jittered, uint8 (H, W, 3)."""
    size = labels.shape[0]
    textures = _ade_textures(rng, size)
    img = np.take_along_axis(textures, labels[None, ..., None], 0)[0]
    img = img * rng.uniform(0.85, 1.15) + rng.uniform(-12, 12, 3)
    img += 5 * rng.standard_normal(img.shape)
    return _to_uint8(img)


def make_mini_ade(root, num_train=64, num_val=16, img_size=128, seed=0,
                  force=False):
    """Write a mini ADE20K-format semantic-segmentation dataset to ``root``.

    Label maps are uint8 PNGs with 0 = other/ignore and the ids of
    :data:`MINI_ADE_CLASSES` (1..6), matching mmseg's ``ADE20KDataset``
    with ``reduce_zero_label=True`` (training labels 0..5, 255 ignored).

    Args:
        root (str): Target directory (must be absent or empty unless
            ``force``).
        num_train (int): Images in ``images/training``.
        num_val (int): Images in ``images/validation``.
        img_size (int): Side of the square images, >= 32.
        seed (int): Seed of all randomness.
        force (bool): Replace an existing mini-data directory at ``root``.

    Returns:
        str: The absolute path of the dataset (mmseg's ``data_root``).
    """
    _check_sizes(img_size, num_train=num_train, num_val=num_val)
    with _staged_splits(root, force, 'ade', num_train, num_val, img_size,
                        seed) as tmp:
        for split, num in (('training', num_train), ('validation', num_val)):

            def draw(index):
                rng = _rng(seed, _ADE, split == 'validation', index)
                labels = _ade_label_map(rng, img_size)
                return _render_ade(rng, labels), labels

            _seg_split(tmp, split, num, draw,
                       lambda index: f'ADE_{split[:5]}_{index + 1:08d}')
    return osp.abspath(root)
