"""Save what a config's data pipeline gives the model, one picture per
sample, to check a dataset and its augmentations before training.

    python tools/analysis_tools/browse_dataset.py CONFIG [--split train]
        [--num 8] [--out-dir DIR] [--cfg-options KEY=VALUE ...]

mmdet and mmseg configs draw the ground truth (boxes, masks, label maps)
with the config's own visualizer, as their ``browse_dataset`` tools do;
mmpretrain configs (classification, pretraining) show every view the
pipeline makes side by side, captioned with the label where there is one.
Pictures go to ``DIR/<index>_<image name>.png`` (default
``work_dirs/browse/<config name>``); nothing else is written.
"""
import argparse
import os
import os.path as osp

import numpy as np
from mmengine.config import DictAction
from mmengine.registry import DATASETS, VISUALIZERS, init_default_scope

from mmpos.analysis.pictures import save_png, tile_grid
from mmpos.guardrails.cli import cli_main
from mmpos.errors import BadInputError
from mmpos.guardrails.launch import load_config


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config')
    parser.add_argument('--split', default='train',
                        choices=['train', 'val', 'test'])
    parser.add_argument('--num', type=int, default=8,
                        help='samples to draw (from the first)')
    parser.add_argument('--out-dir', help='default: work_dirs/browse/'
                        '<config name>')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config entries, e.g. '
                        'train_dataloader.dataset.data_root=DIR')
    return parser.parse_args(argv)


def rgb(image) -> np.ndarray:
    """A packed ``(3, H, W)`` BGR tensor (mmcv's loading order) as an
    ``(H, W, 3)`` uint8 RGB array."""
    return np.ascontiguousarray(
        image.permute(1, 2, 0).numpy()[..., ::-1]).clip(0, 255).astype(
            np.uint8)


def views(inputs) -> list:
    """The sample's images: one, or every view of a multi-view pipeline
    (a list, or a ``(V, 3, H, W)`` stack)."""
    if isinstance(inputs, (list, tuple)):
        return [v for item in inputs for v in views(item)]
    return list(inputs) if inputs.dim() == 4 else [inputs]


def drawable(sample):
    """mmdet's packed ground truth as its visualizer draws it: box and
    mask structures as arrays (what mmdet's browse_dataset does)."""
    from mmdet.structures.bbox import BaseBoxes
    from mmdet.structures.mask import BitmapMasks, PolygonMasks
    gt = sample.gt_instances
    if isinstance(gt.get('bboxes'), BaseBoxes):
        gt.bboxes = gt.bboxes.tensor
    if isinstance(gt.get('masks'), (BitmapMasks, PolygonMasks)):
        gt.masks = gt.masks.to_ndarray()
    return sample


def label_of(sample) -> str:
    label = getattr(sample, 'gt_label', None)
    return '' if label is None else f'label {label.tolist()}'


@cli_main('browse_dataset.py')
def main(argv=None):
    args = parse_args(argv)
    cfg = load_config(args.config, args.cfg_options)
    scope = cfg.get('default_scope', 'mmpretrain')
    init_default_scope(scope)
    loader = cfg.get(f'{args.split}_dataloader')
    if not loader:
        raise BadInputError(f'{args.config}: no {args.split}_dataloader')
    dataset = DATASETS.build(loader.dataset)
    out_dir = args.out_dir or osp.join(
        'work_dirs', 'browse', osp.splitext(osp.basename(args.config))[0])
    os.makedirs(out_dir, exist_ok=True)
    visualizer = None
    if scope in ('mmdet', 'mmseg'):
        visualizer = VISUALIZERS.build(dict(cfg.visualizer, name='browse',
                                            vis_backends=None))
        visualizer.dataset_meta = dataset.metainfo
    written = []
    for index in range(min(args.num, len(dataset))):
        item = dataset[index]
        sample = item['data_samples']
        samples = sample if isinstance(sample, (list, tuple)) else [sample]
        name = osp.splitext(osp.basename(
            samples[0].metainfo.get('img_path') or f'{index}'))[0]
        path = osp.join(out_dir, f'{index:04d}_{name}.png')
        if visualizer is not None:
            if scope == 'mmdet':
                sample = drawable(sample)
            visualizer.add_datasample(name, rgb(item['inputs']), sample,
                                      draw_pred=False, show=False)
            save_png(visualizer.get_image(), path)
        else:
            images = [rgb(v) for v in views(item['inputs'])]
            caption = ' '.join(filter(None, (name, label_of(samples[0]))))
            save_png(tile_grid([images], [[caption] + [''] * (
                len(images) - 1)]), path)
        written.append(path)
    print(f'{len(written)} pictures of the {args.split} set of '
          f'{args.config} in {out_dir}')


if __name__ == '__main__':
    main()
