"""mini-scenes: semantic segmentation in Pascal VOC's layout, the data of
the in-context retrieval probe (:mod:`mmpos.evaluation.dense_retrieval`).

Each image is a scene as mini-objects draws it (:mod:`.objects`): a
background cropped from one of the :data:`~.materials.SCENE_PHOTOS`, with
2 to ``max_instances`` circles, squares and triangles (circumradius 5% to
33% of the image, anywhere, occluding one another), each cut out of one
material of :data:`~.materials.MINI_MATERIALS`; brightness, contrast and
tint are jittered alike for every material, so texture names the class and
neither the outline nor the position does. Labels as in VOC: 0 background,
``1..8`` the materials (:data:`MINI_SCENES_CLASSES`), 255 ("void") on each
object's one-pixel inner outline (VOC draws a band of about 1% of the
image side along object outlines).

Its images are its own (random stream ``_SCENES``): the linear probe's
mini-stuff and the demo's mini-objects share the materials, not an image.
"""
import os
import os.path as osp

import numpy as np
from PIL import Image

from ._io import _check_sizes, _rng, _save_jpeg, _staged_splits
from .materials import MINI_MATERIALS, SCENE_PHOTOS, PhotoBank
from .objects import _render_objects
from .shapes import _sample_layout

_SCENES = 9  # random-stream tag (see ._io)
IGNORE_INDEX = 255
# Label-map index -> class: VOC's background, then the materials.
MINI_SCENES_CLASSES = ('background', *MINI_MATERIALS)


def _scene_label_map(masks, materials, size):
    """uint8 ``(size, size)``: 0 background, ``1 + material`` where an
    object is visible, 255 on object pixels with a 4-neighbour of another
    label (the inner outline)."""
    labels = np.zeros((size, size), np.uint8)
    for mask, material in zip(masks, materials):
        labels[mask] = 1 + int(material)
    padded = np.pad(labels, 1, mode='edge')
    edge = np.zeros((size, size), bool)
    for dy, dx in ((0, 1), (2, 1), (1, 0), (1, 2)):
        edge |= padded[dy:dy + size, dx:dx + size] != labels
    labels[edge & (labels > 0)] = IGNORE_INDEX
    return labels


def make_mini_scenes(root, num_train=256, num_val=256, img_size=64, seed=0,
                     max_instances=5, force=False):
    """Write the mini-scenes segmentation dataset to ``root``.

    Layout of mmseg's Pascal VOC 2012 (``JPEGImages/<id>.jpg``,
    ``SegmentationClass/<id>.png`` and the id lists
    ``ImageSets/Segmentation/{train,val}.txt``), ids ``train_00000``,
    ``val_00000``, ...; read by mmseg's ``BaseSegDataset`` with
    ``metainfo=dict(classes=MINI_SCENES_CLASSES)`` (see
    ``configs/dense_probes/retrieval_mini-scenes.py``).

    Args:
        root (str): Target directory (must be absent or empty unless
            ``force``).
        num_train (int): Training images (the retrieval memory).
        num_val (int): Validation images; the default 256 keeps the
            effect of one image on the mIoU below 0.5 point.
        img_size (int): Side of the square images, >= 32.
        seed (int): Seed of all randomness.
        max_instances (int): Most objects placed per image, >= 2.
        force (bool): Replace an existing mini-data directory at ``root``.

    Returns:
        str: The absolute path of the dataset (its ``data_root``).
    """
    _check_sizes(img_size, num_train=num_train, num_val=num_val)
    if int(max_instances) != max_instances or max_instances < 2:
        raise ValueError(f'max_instances must be an integer >= 2, got '
                         f'{max_instances}')
    bank = PhotoBank([*MINI_MATERIALS.values(), *SCENE_PHOTOS])
    with _staged_splits(root, force, 'scenes', num_train, num_val, img_size,
                        seed, max_instances=max_instances) as tmp:
        dirs = [osp.join(tmp, d) for d in (
            'JPEGImages', 'SegmentationClass', 'ImageSets/Segmentation')]
        for path in dirs:
            os.makedirs(path)
        for split, num in (('train', num_train), ('val', num_val)):
            ids = [f'{split}_{index:05d}' for index in range(num)]
            for index, stem in enumerate(ids):
                rng = _rng(seed, _SCENES, split == 'val', index)
                _, masks = _sample_layout(rng, img_size, max_instances)
                img, materials = _render_objects(rng, bank, img_size, masks)
                _save_jpeg(img, osp.join(dirs[0], stem + '.jpg'))
                Image.fromarray(_scene_label_map(
                    masks, materials, img_size)).save(
                        osp.join(dirs[1], stem + '.png'))
            with open(osp.join(dirs[2], f'{split}.txt'), 'w') as f:
                f.write(''.join(f'{stem}\n' for stem in ids))
    return osp.abspath(root)
