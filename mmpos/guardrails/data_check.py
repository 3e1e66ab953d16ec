"""Checks of dataset annotations before a run starts.

mmdet and mmseg read bad annotations without complaint and fail much later,
deep inside a loss or pycocotools, or not at all (mmdet drops boxes of
negative size; a metainfo class missing from the categories just vanishes).
These checks name the file, the entry and the value instead:

* COCO instance json (:func:`coco_problems`): the ``images`` /
  ``annotations`` / ``categories`` lists, ids, ``bbox`` ``[x, y, w, h]``
  (4 finite numbers, ``w, h >= 0``), ``image_id`` / ``category_id`` that
  exist, polygons of an even number of coordinates, metainfo classes present
  among the category names;
* semantic-segmentation label maps (:func:`seg_label_problems`): the file
  exists, has one channel and the size of its image, and every value is a
  class index or ``ignore_index``.

:func:`config_problems` runs them on the datasets of a config (wrappers
included), built with ``lazy_init=True`` so that nothing is parsed before
it is checked. ``tools/train.py`` / ``tools/test.py`` call
:func:`check_config_datasets` before building the runner: the annotation
files in full and the label maps of a fixed sample of :data:`SAMPLE` (32)
entries per dataset, so that a launch does not open every label map;
``tools/misc/validate_dataset.py`` checks every entry and lists every
problem.
"""
import inspect
import json
import math
import os.path as osp
from itertools import islice
from typing import Iterable, Iterator, List, Optional, Sequence

import numpy as np
from mmengine.dataset import BaseDataset
from mmengine.registry import DATASETS, DefaultScope
from PIL import Image

from mmpos.errors import DatasetFormatError
from .config_check import config_dicts

COCO_KEYS = ('images', 'annotations', 'categories')
# Label maps checked per dataset at launch (tools/train.py, tools/test.py),
# drawn with this seed; tools/misc/validate_dataset.py checks them all.
SAMPLE, SAMPLE_SEED = 32, 0


def _is_number(value) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _is_id(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _entries(name: str, items: list, required: Sequence[str]):
    """``(index, entry, label)`` of the dict entries of a COCO list having
    all ``required`` keys; problems for the others."""
    for i, entry in enumerate(items):
        if not isinstance(entry, dict):
            yield i, None, (f'{name}[{i}] is a {type(entry).__name__}, not '
                            'an object')
            continue
        missing = [k for k in required if k not in entry]
        if missing:
            yield i, None, f'{name}[{i}] has no {missing} key'
            continue
        yield i, entry, None


def _polygon_problem(segm) -> Optional[str]:
    if isinstance(segm, dict):
        if not {'counts', 'size'} <= set(segm):
            return f'RLE segmentation without counts/size: keys {sorted(segm)}'
        return None
    if not isinstance(segm, list):
        return f'segmentation is a {type(segm).__name__}'
    for j, poly in enumerate(segm):
        if not isinstance(poly, list) or not all(map(_is_number, poly)):
            return f'segmentation[{j}] is not a list of numbers'
        if len(poly) % 2:
            return (f'segmentation[{j}] has an odd number ({len(poly)}) of '
                    'coordinates')
    return None


def coco_problems(ann_file: str,
                  classes: Optional[Sequence[str]] = None,
                  require_annotations: bool = True) -> Iterator[str]:
    """Problems of a COCO instance annotation file, one line each.

    Args:
        ann_file: path of the json file.
        classes: the dataset's metainfo classes; each must be a category
            name (mmdet silently drops classes that are not).
        require_annotations: an image-info file without ``annotations``
            (COCO test-dev) passes only when this is False.
    """
    if not osp.isfile(ann_file):
        yield f'{ann_file}: annotation file not found'
        return
    try:
        with open(ann_file, encoding='utf-8') as f:
            data = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        yield f'{ann_file}: not valid JSON: {err}'
        return
    if not isinstance(data, dict):
        yield (f'{ann_file}: top level is a {type(data).__name__}, expected '
               f'an object with keys {list(COCO_KEYS)}')
        return
    keys = COCO_KEYS if require_annotations else ('images', 'categories')
    missing = [k for k in keys if k not in data]
    if missing:
        yield (f'{ann_file}: missing key(s) {missing} (top-level keys: '
               f'{sorted(data)})')
        return
    for key in COCO_KEYS:
        if key in data and not isinstance(data[key], list):
            yield (f'{ann_file}: {key!r} is a {type(data[key]).__name__}, '
                   'expected a list')
            return

    if require_annotations and data['annotations'] == []:
        yield (f'{ann_file}: no annotations (its "annotations" list is '
               'empty; nothing to train or evaluate on)')
        return

    def where(text):
        return f'{ann_file}: {text}'

    image_ids, category_ids, category_names = set(), set(), set()
    for i, img, problem in _entries(
            'images', data['images'], ('id', 'file_name', 'width', 'height')):
        if problem:
            yield where(problem)
        elif not _is_id(img['id']):
            yield where(f'images[{i}]: id {img["id"]!r} is not an integer')
        elif img['id'] in image_ids:
            yield where(f'images[{i}]: duplicate image id {img["id"]}')
        elif not all(_is_id(img[k]) and img[k] > 0
                     for k in ('width', 'height')):
            yield where(f'images[{i}] (id {img["id"]}): width/height '
                        f'{img["width"]!r}/{img["height"]!r} are not '
                        'positive integers')
        else:
            image_ids.add(img['id'])
    for i, cat, problem in _entries('categories', data['categories'],
                                    ('id', 'name')):
        if problem:
            yield where(problem)
        elif not _is_id(cat['id']) or cat['id'] in category_ids:
            yield where(f'categories[{i}]: id {cat["id"]!r} is not a unique '
                        'integer')
        else:
            category_ids.add(cat['id'])
            category_names.add(cat['name'])
    for name in classes or ():
        if name not in category_names:
            yield where(f'metainfo class {name!r} is not among the category '
                        f'names {sorted(category_names)}')
    for i, ann, problem in _entries('annotations', data.get('annotations', []),
                                    ('id', 'image_id', 'category_id', 'bbox')):
        if problem:
            yield where(problem)
            continue
        label = f'annotations[{i}] (id {ann["id"]})'
        bbox = ann['bbox']
        if ann['image_id'] not in image_ids:
            yield where(f'{label}: image_id {ann["image_id"]!r} is not an '
                        'image id')
        if ann['category_id'] not in category_ids:
            yield where(f'{label}: category_id {ann["category_id"]!r} is not '
                        f'in categories {sorted(category_ids)}')
        if not (isinstance(bbox, list) and len(bbox) == 4
                and all(map(_is_number, bbox))):
            yield where(f'{label}: bbox {bbox!r} is not 4 finite numbers '
                        '[x, y, w, h]')
        elif bbox[2] < 0 or bbox[3] < 0:
            yield where(f'{label}: bbox {bbox!r} has a negative width or '
                        'height')
        if ann.get('iscrowd', 0) not in (0, 1):
            yield where(f'{label}: iscrowd {ann["iscrowd"]!r} is not 0 or 1')
        if 'segmentation' in ann:
            problem = _polygon_problem(ann['segmentation'])
            if problem:
                yield where(f'{label}: {problem}')


def _image_size(path):
    """``(width, height)`` from the header; ``None`` if unreadable (images
    are the loader's business: SafeLoadImageFromFile)."""
    try:
        with Image.open(path) as im:
            return im.size
    except (OSError, TypeError, AttributeError):  # missing, corrupt, None
        return None


def seg_label_problems(pairs: Iterable, num_classes: int,
                       reduce_zero_label: bool,
                       ignore_index: int = 255) -> Iterator[str]:
    """Problems of semantic-segmentation label maps, one line each.

    Args:
        pairs: ``(img_path, seg_map_path)`` per sample (``img_path`` may be
            ``None``: no size check).
        num_classes: ``C``; labels are ``0..C-1`` after ``reduce_zero_label``.
        reduce_zero_label: raw 0 means "ignore" and raw ``v`` is class
            ``v - 1`` (ADE20K), so the raw values allowed are ``0..C``.
        ignore_index: the one other value allowed (mmseg's
            ``reduce_zero_label`` maps raw 255 to 255 as well).
    """
    top = num_classes + 1 if reduce_zero_label else num_classes
    allowed = f'0..{top - 1} or {ignore_index}'
    for img_path, seg_path in pairs:
        if not osp.isfile(seg_path):
            yield f'{seg_path}: label map not found'
            continue
        try:
            with Image.open(seg_path) as im:
                label = np.asarray(im)
        except OSError as err:
            yield f'{seg_path}: cannot read the label map: {err}'
            continue
        if label.ndim != 2:
            yield (f'{seg_path}: label map of shape {label.shape}; expected '
                   'one channel of class indices')
            continue
        size = _image_size(img_path)
        if size is not None:
            width, height = size
            if (height, width) != label.shape:
                yield (f'{seg_path}: label map is {label.shape[0]}x'
                       f'{label.shape[1]} but its image {img_path} is '
                       f'{height}x{width}')
        values = (np.flatnonzero(np.bincount(label.ravel(), minlength=256))
                  if label.dtype == np.uint8 else np.unique(label))
        bad = values[(values >= top) & (values != ignore_index)]
        if bad.size:
            yield (f'{seg_path}: label values {bad[:8].tolist()} out of range '
                   f'(allowed {allowed}: num_classes={num_classes}, '
                   f'reduce_zero_label={reduce_zero_label})')


def sample_indices(total: int, size: Optional[int]) -> List[int]:
    """``size`` of ``range(total)`` drawn with the fixed seed
    :data:`SAMPLE_SEED`, in order (all of them for ``size=None`` or
    ``size >= total``): the same entries at every launch."""
    if size is None or size >= total:
        return list(range(total))
    rng = np.random.default_rng(SAMPLE_SEED)
    return sorted(rng.choice(total, size, replace=False).tolist())


def dataset_problems(dataset, split: str = 'train',
                     sample: Optional[int] = None) -> Iterator[str]:
    """Problems of a built (``lazy_init=True``) dataset object.

    COCO-style mmdet datasets (``COCOAPI``) get :func:`coco_problems` on
    ``ann_file`` (all of it); mmseg datasets (``seg_map_suffix``) get
    :func:`seg_label_problems` on the label maps of ``sample`` entries
    (:func:`sample_indices`; ``None``: every entry); other datasets
    nothing. ``split='test'`` accepts a COCO file without annotations
    (test-dev).
    """
    if hasattr(dataset, 'COCOAPI'):
        yield from coco_problems(dataset.ann_file,
                                 dataset.metainfo.get('classes'),
                                 require_annotations=split != 'test')
    elif hasattr(dataset, 'seg_map_suffix'):
        dataset.full_init()
        # With a class subset (label_map) raw values index the full list.
        classes = (type(dataset).METAINFO['classes']
                   if dataset.label_map else dataset.metainfo['classes'])
        infos = map(dataset.get_data_info,
                    sample_indices(len(dataset), sample))
        yield from seg_label_problems(
            ((info['img_path'], info['seg_map_path']) for info in infos),
            len(classes), dataset.reduce_zero_label, dataset.ignore_index)


def _num_classes(model_cfg):
    """``(key, value)`` of every ``num_classes`` in a model config, but
    the class-agnostic region proposal heads' (``rpn_head``)."""
    for where, node in config_dicts(model_cfg, 'model'):
        if isinstance(node.get('num_classes'), int) and 'rpn' not in where:
            yield f'{where}.num_classes', node['num_classes']


def num_classes_problems(model_cfg, classes: Optional[Sequence[str]],
                         dataset: str) -> Iterator[str]:
    """A model ``num_classes`` below the number of ``classes`` of a
    dataset (its labels would index past the classifier: an IndexError
    deep inside a loss)."""
    if not classes or not model_cfg:
        return
    for key, value in _num_classes(model_cfg):
        if value < len(classes):
            yield (f'{key}={value} is below the {len(classes)} classes of '
                   f'{dataset} ({", ".join(map(str, classes[:4]))}'
                   f'{", ..." if len(classes) > 4 else ""})')


WRAPPED = ('dataset', 'datasets')  # what dataset wrappers hold


def _leaf_dataset_cfgs(dataset_cfg) -> Iterator[dict]:
    """The datasets inside wrappers (``dataset=``, ``datasets=[...]``)."""
    for where, node in config_dicts(dataset_cfg):
        path = where.split('.') if where else []
        if all(p in WRAPPED or p.isdigit() for p in path) and \
                not any(key in node for key in WRAPPED):
            yield node


def _is_base_dataset(ds_cfg) -> bool:
    """Whether the dataset class (in the current or the config's own
    ``_scope_``) is an mmengine ``BaseDataset``, i.e. takes ``lazy_init``;
    others are not checked."""
    cls = ds_cfg.get('type')
    if not inspect.isclass(cls):
        with DATASETS.switch_scope_and_registry(
                ds_cfg.get('_scope_')) as registry:
            cls = registry.get(cls)
    return inspect.isclass(cls) and issubclass(cls, BaseDataset)


def config_problems(cfg, splits: Sequence[str] = ('train', 'val', 'test'),
                    sample: Optional[int] = None) -> Iterator[str]:
    """Problems of the datasets of ``cfg``'s ``<split>_dataloader``s.

    Each dataset is built in the config's ``default_scope`` with
    ``lazy_init=True`` (so paths are joined exactly as the dataset does and
    no annotation is parsed unchecked), and checked by
    :func:`dataset_problems` (label maps: ``sample`` entries of each
    dataset; ``None``: all). A dataset shared by several splits is checked
    once.
    """
    seen = set()
    with DefaultScope.overwrite_default_scope(cfg.get('default_scope')):
        for split in splits:
            loader = cfg.get(f'{split}_dataloader')
            if not loader or not loader.get('dataset'):
                continue
            for ds_cfg in _leaf_dataset_cfgs(loader['dataset']):
                key = repr(ds_cfg)
                if key in seen:
                    continue
                seen.add(key)
                if _is_base_dataset(ds_cfg):
                    dataset = DATASETS.build({**ds_cfg, 'lazy_init': True})
                    yield from dataset_problems(dataset, split, sample)
                    yield from num_classes_problems(
                        cfg.get('model'), dataset.metainfo.get('classes'),
                        f'{split}_dataloader.dataset')


def check_config_datasets(cfg, splits: Sequence[str] = ('train', 'val'),
                          sample: Optional[int] = SAMPLE) -> None:
    """Raise :class:`DatasetFormatError` with the first problem of
    :func:`config_problems`: the annotation files in full and the label
    maps of ``sample`` entries per dataset (a fixed-seed sample,
    :func:`sample_indices`; ``None``: all). Every problem of every entry:
    ``tools/misc/validate_dataset.py``.
    """
    first = list(islice(config_problems(cfg, splits, sample), 1))
    if first:
        checked = ('' if sample is None else
                   f'label maps checked: a fixed sample of {sample} per '
                   'dataset; ')
        raise DatasetFormatError(
            f'{first[0]} ({checked}all problems: python tools/misc/'
            'validate_dataset.py CONFIG)')


__all__ = [
    'DatasetFormatError', 'check_config_datasets', 'coco_problems',
    'config_problems', 'dataset_problems', 'num_classes_problems',
    'sample_indices', 'seg_label_problems'
]
