"""mini-COCO: COCO instance segmentation of occluding textured shapes."""
import os
import os.path as osp

from ._io import (_COCO, _check_sizes, _rng, _save_jpeg, _staged_splits,
                  _write_json)
from .shapes import (MINI_COCO_CLASSES, _bbox, _polygons, _render_scene,
                     _sample_layout)


def _coco_split(root, split, num, draw, classes, supercategory,
                description):
    """Write ``{split}2017/*.jpg`` and return the split's COCO dict.

    ``draw(split, index)`` gives image ``index`` of the split as ``(img,
    labels, masks)``: uint8 (H, W, 3), class indices into ``classes`` and
    the boolean visible mask of every instance.
    """
    os.makedirs(osp.join(root, f'{split}2017'))
    images, annotations = [], []
    for index in range(num):
        img, labels, masks = draw(split, index)
        image_id = index + 1
        file_name = f'{image_id:012d}.jpg'
        _save_jpeg(img, osp.join(root, f'{split}2017', file_name))
        images.append(
            dict(id=image_id, file_name=file_name, width=img.shape[1],
                 height=img.shape[0], license=1))
        for label, mask in zip(labels, masks):
            annotations.append(
                dict(id=len(annotations) + 1, image_id=image_id,
                     category_id=int(label) + 1,
                     segmentation=_polygons(mask), area=int(mask.sum()),
                     bbox=_bbox(mask), iscrowd=0))
    return dict(
        info=dict(
            description=f'mmpos {description} ({split})', version='1.0',
            year=2024, contributor='mmpos', url='',
            date_created='2024-01-01'),
        licenses=[dict(id=1, name='CC0 1.0', url='')],
        images=images,
        annotations=annotations,
        categories=[
            dict(id=i + 1, name=name, supercategory=supercategory)
            for i, name in enumerate(classes)
        ])


def _make_coco(root, force, dataset, num_train, num_val, img_size, seed,
               max_instances, draw, classes, supercategory, description):
    """Check the arguments, then write both splits of a COCO dataset to
    ``root`` (staged, see :func:`._io._staged_dir`) with images from
    ``draw`` (see :func:`_coco_split`); returns the absolute path."""
    _check_sizes(img_size, num_train=num_train, num_val=num_val)
    if max_instances < 2:
        raise ValueError(f'max_instances must be >= 2, got {max_instances}')
    with _staged_splits(root, force, dataset, num_train, num_val, img_size,
                        seed, max_instances=max_instances) as tmp:
        os.makedirs(osp.join(tmp, 'annotations'))
        for split, num in (('train', num_train), ('val', num_val)):
            coco = _coco_split(tmp, split, num, draw, classes, supercategory,
                               description)
            _write_json(
                osp.join(tmp, 'annotations', f'instances_{split}2017.json'),
                coco)
    return osp.abspath(root)


def make_mini_coco(root, num_train=64, num_val=16, img_size=128, seed=0,
                   max_instances=6, force=False):
    """Write a mini COCO instance-segmentation dataset to ``root``.

    Categories are :data:`MINI_COCO_CLASSES` (ids 1, 2, 3). Each image holds
    2..``max_instances`` shapes (circumradius 5% to 33% of ``img_size``)
    before occlusion drops; every annotation describes the visible part.

    Args:
        root (str): Target directory (created; must be absent or empty
            unless ``force``).
        num_train (int): Images in ``train2017``.
        num_val (int): Images in ``val2017``.
        img_size (int): Side of the square images, >= 32.
        seed (int): Seed of all randomness.
        max_instances (int): Most shapes placed per image, >= 2.
        force (bool): Replace an existing mini-data directory at ``root``.

    Returns:
        str: The absolute path of the dataset.
    """
    def draw(split, index):
        rng = _rng(seed, _COCO, split == 'val', index)
        labels, masks = _sample_layout(rng, img_size, max_instances)
        return _render_scene(rng, img_size, masks), labels, masks

    return _make_coco(root, force, 'coco', num_train, num_val, img_size,
                      seed, max_instances, draw, MINI_COCO_CLASSES, 'shape',
                      'mini-COCO, synthetic shapes')
