"""mini-cls: one textured circle, square or triangle per image, in
mmpretrain's folder-per-class layout: the labelled set of the kNN probe
(memory ``train``, queries ``val``; offline ``tools/analysis_tools/
knn_eval.py`` and the pretraining configs' online probe,
``{train_data_root}/../cls``), of the linear classification probe and of
the health monitor (the first 16 ``val`` images)."""
import os
import os.path as osp

import numpy as np

from ._io import _CLS, _check_sizes, _rng, _save_jpeg, _staged_splits
from .shapes import _SIDES, MINI_COCO_CLASSES, _render_scene, _shape_mask
from .textures import _grid


def _class_image(rng, size, label):
    """One shape of class ``label`` (circumradius 18% to 40% of ``size``,
    random rotation and position, fully inside) on a textured background,
    uint8 (H, W, 3)."""
    xs, ys = _grid(size)
    radius = size * rng.uniform(0.18, 0.4)
    cx, cy = rng.uniform(radius, size - radius, 2)
    mask = _shape_mask(xs, ys, _SIDES[MINI_COCO_CLASSES[label]], cx, cy,
                       radius, rng.uniform(0, 2 * np.pi))
    return _render_scene(rng, size, [mask])


# Queries by default (the pretraining configs' online probe and the
# guides): >= 200, so that one query moves the kNN accuracy by at most 0.5
# point, and a multiple of the 3 classes. The comparisons' kNN probe writes
# its own set with 1,200 (mmpos_harness.comparison.runs.KNN_SIZES; a
# binomial SE of 3.2 points at 240 queries was too coarse, issue 55).
NUM_QUERIES = 240


def make_mini_cls(root, num_train=64, num_val=NUM_QUERIES, img_size=64,
                  seed=0, force=False):
    """Write a mini image-classification dataset to ``root``.

    Classes are :data:`MINI_COCO_CLASSES` (circle, square, triangle), image
    ``i`` of a split showing one shape of class ``i % 3`` (balanced splits).
    Layout ``{train,val}/<class>/<index>.jpg``, read by mmpretrain's
    ``CustomDataset(data_root=root, data_prefix='train')``, which takes the
    sorted folder names (the order above) as classes.

    Args:
        root (str): Target directory (must be absent or empty unless
            ``force``).
        num_train (int): Images in ``train``.
        num_val (int): Images in ``val`` (the kNN queries; default
            :data:`NUM_QUERIES`). Image ``i`` does not depend on the count,
            so the first 16 (the health monitor's) stay the same.
        img_size (int): Side of the square images, >= 32.
        seed (int): Seed of all randomness.
        force (bool): Replace an existing mini-data directory at ``root``.

    Returns:
        str: The absolute path of the dataset (``CustomDataset``'s
        ``data_root``).
    """
    _check_sizes(img_size, num_train=num_train, num_val=num_val)
    with _staged_splits(root, force, 'cls', num_train, num_val, img_size,
                        seed) as tmp:
        for split, num in (('train', num_train), ('val', num_val)):
            for name in MINI_COCO_CLASSES:
                os.makedirs(osp.join(tmp, split, name))
            for index in range(num):
                label = index % len(MINI_COCO_CLASSES)
                rng = _rng(seed, _CLS, split == 'val', index)
                _save_jpeg(
                    _class_image(rng, img_size, label),
                    osp.join(tmp, split, MINI_COCO_CLASSES[label],
                             f'{index:05d}.jpg'))
    return osp.abspath(root)
