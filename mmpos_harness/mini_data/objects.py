"""mini-objects: COCO instance segmentation where the class is the material.

Every instance is a circle, square or triangle (outline drawn at random,
independent of the class) cut out of one material of
:data:`~.materials.MINI_MATERIALS`, on a background cropped from one of the
:data:`~.materials.SCENE_PHOTOS`; brightness, contrast and tint are
jittered alike for every material and for the background, so the outline
never names the class and colour only for some materials: texture does. Sizes span small to large (circumradius 5% to
33% of the image), and instances occlude one another; boxes, areas and
polygons describe the visible part (:func:`.shapes._sample_layout`).
Read by :class:`mmpos_harness.mini_data.datasets.MiniObjectsDataset`.
"""
import numpy as np

from ._io import _OBJECTS, _rng
from .coco import _make_coco
from .materials import MINI_MATERIALS, SCENE_PHOTOS, PhotoBank, _paint
from .shapes import _sample_layout
from .textures import _to_uint8


def _render_objects(rng, bank, size, masks):
    """Scene background with a random material painted into each visible
    mask; returns the image (uint8 (H, W, 3)) and the material indices."""
    names = list(MINI_MATERIALS)
    scene = SCENE_PHOTOS[int(rng.integers(len(SCENE_PHOTOS)))]
    img = _paint(rng, bank.patch(rng, scene, size, scale=(0.3, 0.8)))
    labels = rng.integers(0, len(names), len(masks))
    for label, mask in zip(labels, masks):
        fill = _paint(rng, bank.patch(rng, MINI_MATERIALS[names[label]],
                                      size))
        img[mask] = fill[mask]
    img += 3 * rng.standard_normal(img.shape).astype(np.float32)
    return _to_uint8(img), labels


def make_mini_objects(root, num_train=32, num_val=32, img_size=64, seed=0,
                      max_instances=5, force=False):
    """Write the mini-objects instance-segmentation dataset to ``root``.

    COCO layout (``annotations/instances_{train,val}2017.json`` +
    ``{train,val}2017/*.jpg``), category ids ``1..8`` for the materials in
    :data:`~.materials.MINI_MATERIALS` order.

    Args:
        root (str): Target directory (must be absent or empty unless
            ``force``).
        num_train (int): Images in ``train2017``.
        num_val (int): Images in ``val2017``.
        img_size (int): Side of the square images, >= 32.
        seed (int): Seed of all randomness.
        max_instances (int): Most objects placed per image, >= 2.
        force (bool): Replace an existing mini-data directory at ``root``.

    Returns:
        str: The absolute path of the dataset.
    """
    bank = PhotoBank([*MINI_MATERIALS.values(), *SCENE_PHOTOS])

    def draw(split, index):
        rng = _rng(seed, _OBJECTS, split == 'val', index)
        _, masks = _sample_layout(rng, img_size, max_instances)
        img, labels = _render_objects(rng, bank, img_size, masks)
        return img, labels, masks

    return _make_coco(root, force, 'objects', num_train, num_val, img_size,
                      seed, max_instances, draw, list(MINI_MATERIALS),
                      'material', 'mini-objects, materials')
