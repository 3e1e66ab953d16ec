"""Images/s of the box-recording multi-view pipelines against mmpretrain's
``MultiView`` on the same images.

Two pipelines, each run as configured (``ours``) and with the box-recording
transforms swapped for mmpretrain's / mmcv's own (``baseline``):

* ``cr2pq``: two BYOL views (``configs/cr2pq/_base_/imagenet_byol-views_
  boxes.py``): ``MultiViewWithBoxes`` + ``RandomResizedCropWithBox`` +
  ``RandomFlipWithBox`` + ``PackInputs(algorithm_keys=['crop_boxes'])``
  against ``MultiView`` + ``RandomResizedCrop`` + ``RandomFlip`` +
  ``PackInputs``.
* ``icpf``: DINOv2's multi-crop (2 global 224px + 8 local 96px crops,
  ``configs/dinov2/dinov2_vit-small-p16_4xb128-100e_in1k.py``, mmpretrain's
  ``MultiView``) as the baseline, and the same views with the box-recording
  crop/flip (``MultiViewWithBoxes``) as ICPF needs for its field crops.

Everything else in the views (colour jitter, grayscale, blur, solarisation,
output sizes) is identical. The images are the mini unlabeled images of
``mmpos_harness.mini_data`` (photograph crops and synthetic scenes), decoded
once into memory before timing: JPEG decoding would be the same for both.
One timed call pushes every image once through a pipeline with numpy's and
Python's RNGs reseeded identically for both, so both draw the very same crops,
flips and colour parameters and the ratio isolates the cost of recording and
stacking the boxes. Calls are interleaved (``_timing.measure``) in one
process without dataloader workers; images/s = images / median seconds.
No memory is reported: the transforms allocate numpy / PIL memory, which
torch's allocator statistics do not see.

Full: 64 images of 256 px. ``--quick``: 16 images of 128 px.

    python benchmarks/pipeline_throughput.py [--quick] [--iters N]
        [--warmup N] [--num-images N] [--image-size N]
"""
import argparse
import copy
import os
import os.path as osp
import random
import tempfile

import _timing
import numpy as np
import torch

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
PIPELINES = {
    'cr2pq': 'configs/cr2pq/_base_/imagenet_byol-views_boxes.py',
    'icpf': 'configs/dinov2/dinov2_vit-small-p16_4xb128-100e_in1k.py',
}
TO_BOXES = {
    'MultiView': 'MultiViewWithBoxes',
    'RandomResizedCrop': 'RandomResizedCropWithBox',
    'RandomFlip': 'RandomFlipWithBox',
}
FROM_BOXES = {v: k for k, v in TO_BOXES.items()}


def swap_types(cfg, with_boxes: bool):
    """A copy of the transform config(s) ``cfg`` using the box-recording
    transforms (``with_boxes``) or mmpretrain's / mmcv's own ones."""
    if isinstance(cfg, (list, tuple)):
        return [swap_types(c, with_boxes) for c in cfg]
    if not isinstance(cfg, dict):
        return cfg
    out = {k: swap_types(v, with_boxes) for k, v in cfg.items()}
    if 'type' in out:
        out['type'] = (TO_BOXES if with_boxes else FROM_BOXES).get(
            out['type'], out['type'])
        if out['type'] == 'PackInputs':
            out.pop('algorithm_keys', None)
            if with_boxes:
                out['algorithm_keys'] = ['crop_boxes']
    return out


def build_pipelines(name: str) -> dict:
    """``{'ours': callable, 'baseline': callable}`` from the config's
    ``train_pipeline`` without its ``LoadImageFromFile``."""
    from mmengine.config import Config
    from mmengine.dataset import Compose
    from mmengine.registry import init_default_scope

    import mmpos.datasets.transforms  # noqa: F401 (registers the transforms)
    init_default_scope('mmpretrain')
    cfg = Config.fromfile(osp.join(REPO, PIPELINES[name]))
    steps = [t.to_dict() if hasattr(t, 'to_dict') else dict(t)
             for t in cfg.train_pipeline if t['type'] != 'LoadImageFromFile']
    return dict(ours=Compose(swap_types(steps, True)),
                baseline=Compose(swap_types(steps, False)))


def load_images(num_images: int, img_size: int) -> list:
    """Decoded ``LoadImageFromFile`` results of freshly generated mini
    unlabeled images (BGR uint8)."""
    import mmcv

    from mmpos_harness.mini_data import (available_skimage_photos,
                                         make_unlabeled_images)
    with tempfile.TemporaryDirectory() as tmp:
        root = make_unlabeled_images(
            osp.join(tmp, 'unlabeled'), num_images, img_size,
            photo_fraction=0.75 if available_skimage_photos() else 0.)
        paths = sorted(osp.join(root, f) for f in os.listdir(root)
                       if f.endswith('.jpg'))
        images = [mmcv.imread(p) for p in paths]
    return [dict(img=img, img_shape=img.shape[:2], ori_shape=img.shape[:2])
            for img in images]


def seed_all(seed: int) -> None:
    """Seed the RNGs the transforms draw from (numpy's and Python's)."""
    np.random.seed(seed)
    random.seed(seed)


def epoch(pipeline, images: list, seed: int = 0):
    """Push every image through ``pipeline`` once, RNGs seeded by ``seed``.
    """
    seed_all(seed)
    for results in images:
        pipeline(copy.copy(results))


def run(quick: bool = False, iters: int = None, warmup: int = None,
        num_images: int = None, image_size: int = None) -> dict:
    """Returns ``{'settings': ..., '<pipeline>': {'ours' | 'baseline':
    {step_ms, images_per_s, time_ratio}, 'views': V}}`` (``step_ms``: one
    pass over all images; ratios against ``baseline``)."""
    iters = iters or (3 if quick else 10)
    warmup = warmup if warmup is not None else 1
    num_images = num_images or (16 if quick else 64)
    image_size = image_size or (128 if quick else 256)
    images = load_images(num_images, image_size)
    device = torch.device('cpu')
    result = dict(settings=_timing.settings(
        device, None, quick=quick, iters=iters, warmup=warmup,
        num_images=num_images, image_size=image_size, workers=0))
    for name in PIPELINES:
        pipelines = build_pipelines(name)
        steps = {key: (lambda p=p: epoch(p, images))
                 for key, p in pipelines.items()}
        stats = _timing.measure(steps, device, warmup, iters, num_images,
                                memory=False)
        _timing.add_ratios(stats, 'baseline')
        sample = pipelines['ours'](copy.copy(images[0]))
        stats['views'] = len(sample['inputs'])
        stats['crop_boxes_shape'] = list(
            sample['data_samples'].crop_boxes.shape)
        result[name] = stats
    return result


def summarize(result: dict) -> list:
    """Summary rows (``_timing.comparison``) of :func:`run`'s result."""
    labels = dict(cr2pq='CR2PQ 2 views + boxes',
                  icpf='ICPF 2+8 crops + boxes')
    return [
        _timing.comparison(f'pipeline {name} ({result[name]["views"]} views)',
                           labels[name], result[name]['ours'],
                           'mmpretrain MultiView (same views)',
                           result[name]['baseline'])
        for name in PIPELINES
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true')
    parser.add_argument('--iters', type=int)
    parser.add_argument('--warmup', type=int)
    parser.add_argument('--num-images', type=int)
    parser.add_argument('--image-size', type=int)
    args = parser.parse_args()
    result = run(args.quick, args.iters, args.warmup, args.num_images,
                 args.image_size)
    print('settings:', result['settings'])
    for row in summarize(result):
        print(f"{row['benchmark']:<26} ours {row['ours_images_per_s']:7.1f} "
              f"img/s, baseline {row['baseline_images_per_s']:7.1f} img/s, "
              f"ours / baseline time {_timing.format_ratio(row)}x")


if __name__ == '__main__':
    main()
