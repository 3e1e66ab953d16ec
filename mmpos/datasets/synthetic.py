"""Synthetic datasets of the real layouts, for running a config at its
real size without its data: ImageNet folders (500x375 JPEGs), COCO
instances (1024x768 images, :data:`INSTANCES` boxes and polygon masks
each) and ADE20K (683x512 images and label maps).

:func:`synthesize` writes what a config's dataloaders read and points the
config at it; the full-size rehearsal (``tools/misc/rehearse.py``) and the
planner's detection and segmentation samples
(:mod:`mmpos.analysis.plan`) use it.
"""
import json
import os
import os.path as osp
from typing import Callable, Dict, List, Tuple

import numpy as np
from PIL import Image

#: ground-truth instances per synthetic COCO image (what the planner's
#: detection rows assume as well)
INSTANCES = 3


def write_image(path: str, size: Tuple[int, int], seed: int) -> None:
    """A JPEG of ``size`` = (width, height): smooth colour fields plus
    noise, so that crops and photometric transforms see texture."""
    rng = np.random.default_rng(seed)
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    phase = rng.uniform(0, 2 * np.pi, 3)
    img = np.stack([127 + 80 * np.sin(xx / (17 + 9 * c) + yy / 23 + phase[c])
                    for c in range(3)], -1)
    img += rng.normal(0, 20, img.shape)
    os.makedirs(osp.dirname(path), exist_ok=True)
    Image.fromarray(img.clip(0, 255).astype(np.uint8)).save(path, quality=90)


def _imagenet(root: str, split: str, count: int) -> None:
    """``root/<split>/*.JPEG`` (500x375, ImageNet's typical size) and
    ``root/meta/<split>.txt`` with labels in 0-999."""
    lines = []
    for i in range(count):
        name = f'{split}_{i:04d}.JPEG'
        write_image(osp.join(root, split, name), (500, 375), seed=i)
        lines.append(f'{name} {i * 37 % 1000}')
    os.makedirs(osp.join(root, 'meta'), exist_ok=True)
    with open(osp.join(root, 'meta', f'{split}.txt'), 'w') as f:
        f.write('\n'.join(lines) + '\n')


def _coco(root: str, ann_file: str, img_prefix: str, count: int) -> None:
    """COCO instances: ``count`` 1024x768 images under ``img_prefix``, each
    with :data:`INSTANCES` boxes and polygon masks of COCO's 80 classes."""
    from mmdet.datasets import CocoDataset
    classes = CocoDataset.METAINFO['classes']
    images, annotations = [], []
    for i in range(count):
        name = f'{i:012d}.jpg'
        write_image(osp.join(root, img_prefix, name), (1024, 768), seed=100 + i)
        images.append(dict(id=i + 1, file_name=name, width=1024, height=768))
        for k in range(INSTANCES):
            x, y = 80 + 280 * k, 100 + 150 * k
            w, h = 200, 260
            annotations.append(dict(
                id=len(annotations) + 1, image_id=i + 1, iscrowd=0,
                category_id=(i * INSTANCES + k) % len(classes) + 1,
                bbox=[x, y, w, h], area=w * h,
                segmentation=[[x, y, x + w, y, x + w, y + h, x, y + h]]))
    categories = [dict(id=j + 1, name=c) for j, c in enumerate(classes)]
    path = osp.join(root, ann_file)
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        json.dump(dict(images=images, annotations=annotations,
                       categories=categories), f)


def _ade20k(root: str, img_dir: str, seg_dir: str, count: int) -> None:
    """ADE20K: ``count`` 683x512 JPEGs and label PNGs (0 = other, 1-150
    the classes; mmseg reduces 0 to ignore)."""
    for i in range(count):
        name = f'ADE_{i:08d}'
        write_image(osp.join(root, img_dir, name + '.jpg'), (683, 512),
               seed=200 + i)
        labels = (np.arange(683)[None, :] // 60 + np.arange(512)[:, None]
                  // 60 + 7 * i) % 151
        os.makedirs(osp.join(root, seg_dir), exist_ok=True)
        Image.fromarray(labels.astype(np.uint8)).save(
            osp.join(root, seg_dir, name + '.png'))


def _write_imagenet(ds: dict, root: str, count: int) -> None:
    _imagenet(root, ds['split'], count)


def _write_coco(ds: dict, root: str, count: int) -> None:
    _coco(root, ds['ann_file'], ds['data_prefix']['img'], count)


def _write_ade20k(ds: dict, root: str, count: int) -> None:
    prefix = ds['data_prefix']
    _ade20k(root, prefix['img_path'], prefix['seg_map_path'], count)


#: dataset type -> (folder name under the synthetic root, writer of
#: ``count`` samples of the dataset dict's layout)
SYNTHETIC: Dict[str, Tuple[str, Callable]] = {
    'ImageNet': ('imagenet', _write_imagenet),
    'CocoDataset': ('coco', _write_coco),
    'ADE20KDataset': ('ade20k', _write_ade20k),
}
LOADERS = ('train_dataloader', 'val_dataloader', 'test_dataloader')


def _replace_prefix(node, old: str, new: str):
    """``node`` with every string that starts with the path ``old``
    re-rooted at ``new`` (the datasets' roots and the evaluators' files)."""
    if isinstance(node, dict):
        return type(node)({k: _replace_prefix(v, old, new)
                           for k, v in node.items()})
    if isinstance(node, (list, tuple)):
        return type(node)(_replace_prefix(v, old, new) for v in node)
    if isinstance(node, str) and (node == old or node.startswith(old + '/')):
        return new + node[len(old):]
    return node


def synthesize(cfg, data_root: str, procs: int, batch: int = 1,
               iters: int = 2) -> List[str]:
    """Write synthetic data for every dataset of ``cfg``'s dataloaders
    under ``data_root`` and point ``cfg`` at it (in place); returns what
    was written, a line each.

    Training sets hold ``procs * batch * iters`` samples (one epoch is
    ``iters`` iterations of ``batch`` per process); validation and
    test sets ``procs`` samples (one step of batch 1 per process).

    Raises:
        ValueError: a dataset type without a synthetic layout, naming it.
    """
    written, roots = [], {}
    for key in LOADERS:
        loader = cfg.get(key)
        if not loader:
            continue
        ds = loader['dataset']
        if ds['type'] not in SYNTHETIC:
            raise ValueError(
                f'{key}.dataset.type={ds["type"]!r} has no '
                f'synthetic layout (known: {", ".join(sorted(SYNTHETIC))})')
        folder, write = SYNTHETIC[ds['type']]
        old = ds['data_root'].rstrip('/')
        new = roots.setdefault(old, osp.join(data_root, folder))
        count = procs * (batch * iters if key == 'train_dataloader' else 1)
        write(ds, new, count)
        written.append(f'{key}: {count} synthetic {ds["type"]} samples '
                       f'in {folder}/')
    for old, new in roots.items():
        for key in list(cfg.keys()):
            cfg[key] = _replace_prefix(cfg[key], old, new)
    return written
