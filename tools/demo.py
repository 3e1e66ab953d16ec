"""The README's demo: mini data -> DropPos pretraining of a tiny RoPE-Mixed
ViT on the unlabeled mini images -> backbone extracted from the checkpoint ->
transfer to Mask R-CNN (mini-COCO) and UperNet (mini-ADE) on CPU -> metrics
from the real COCO and mmseg evaluators -> the table regenerated from the
finished work dirs -> pictures of the models on a real photograph
(scikit-image's ``chelsea``): PCA of the pretrained patch features and class
attention maps at several input sizes, DropPos' predicted patch positions,
and the detector's and segmenter's predictions drawn by mmdet's and mmseg's
visualizers, all under ``<run>/pictures/``.

    python tools/demo.py [--data-root data/mini] [--work-dir work_dirs/demo]
        [--from-scratch] [--pretrain-iters N] [--iters N]

``--from-scratch`` skips pretraining (random backbone init), for comparison.

Existing mini data is reused (never regenerated over); every run writes to a
fresh timestamped directory under ``--work-dir``.
"""
import argparse
import json
import os
import os.path as osp
import subprocess
import sys
import time

from mmpos.utils.cli import cli_main

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
PRETRAIN = 'configs/demo/droppos_vit-tiny-rope-mixed_mini.py'
STAGES = (
    ('detection', 'configs/demo/mask-rcnn_vit-tiny-rope-mixed_mini-coco.py',
     ('coco/bbox_mAP', 'coco/bbox_mAP_50', 'coco/segm_mAP')),
    ('segmentation', 'configs/demo/upernet_vit-tiny-rope-mixed_mini-ade.py',
     ('mIoU', 'mAcc', 'aAcc')),
)


def run(cmd):
    print('+', ' '.join(cmd), flush=True)
    if subprocess.run(cmd, cwd=ROOT).returncode:
        raise SystemExit(f'demo: stopped, this step failed (its error is '
                         f'above): {" ".join(cmd[1:3])}')


def ensure_mini_data(data_root):
    missing = [
        name for name in ('coco', 'ade', 'unlabeled', 'cls')
        if not osp.isdir(osp.join(data_root, name))
    ]
    if missing:
        run([sys.executable, 'tools/misc/make_mini_data.py', data_root,
             '--which', *missing])
    else:
        print(f'reusing mini data in {data_root}')


def last_scalars(work_dir, keys, window=10):
    """Mean of the last ``window`` logged training values of ``keys``."""
    from mmpos.paper_tables.results import training_records
    records = [r for r in training_records(work_dir)
               if all(k in r for k in keys)][-window:]
    return {k: round(sum(r[k] for r in records) / len(records), 4)
            for k in keys} if records else {}


def pretrain(args, run_dir):
    """DropPos on the unlabeled mini images; returns the extracted backbone
    checkpoint, the training checkpoint and the pretraining metrics."""
    work_dir = osp.join(run_dir, 'pretraining')
    options = [
        'train_dataloader.dataset.data_root='
        f'{osp.join(args.data_root, "unlabeled")}/'
    ]
    if args.pretrain_iters:
        options.append(f'train_cfg.max_iters={args.pretrain_iters}')
    start = time.time()
    run([sys.executable, 'tools/train.py', PRETRAIN, '--work-dir', work_dir,
         '--cfg-options', *options])
    with open(osp.join(work_dir, 'last_checkpoint')) as f:
        checkpoint = f.read().strip()
    backbone = osp.join(work_dir, 'backbone.pth')
    # checked against the detector's backbone: no key may be missing
    run([sys.executable, 'tools/model_converters/mmpos2backbone.py',
         checkpoint, backbone, '--config', STAGES[0][1]])
    metrics = last_scalars(work_dir, ('loss', 'acc_pos'))
    metrics['chance'] = round(1 / 16, 4)
    probe = last_scalars(work_dir, ('knn_cls_top1', 'knn_avg_top1'),
                         window=1)  # the online probe after the last iter
    metrics.update(probe)
    metrics['minutes'] = round((time.time() - start) / 60, 2)
    return backbone, checkpoint, metrics


def pictures(run_dir, backbone, pretrained, transfer_checkpoints):
    """PNGs of the models on scikit-image's ``chelsea`` photograph; returns
    their paths."""
    from PIL import Image
    from skimage import data
    out_dir = osp.join(run_dir, 'pictures')
    os.makedirs(out_dir, exist_ok=True)
    image = osp.join(out_dir, 'chelsea.png')
    Image.fromarray(data.chelsea()).save(image)
    if backbone:
        run([sys.executable, 'tools/analysis_tools/feature_pictures.py',
             PRETRAIN, backbone, image, '--out-dir', out_dir, '--sizes', '32',
             '64', '128', '--layers', '1', '3', '--heads', '0', '1', '2'])
        run([sys.executable, 'tools/analysis_tools/droppos_positions.py',
             PRETRAIN, pretrained, image, '--out',
             osp.join(out_dir, 'chelsea_droppos.png')])
    for name, (config, checkpoint) in transfer_checkpoints.items():
        run([sys.executable, 'tools/infer.py', config, checkpoint, image,
             '--out-dir', osp.join(out_dir, name), '--score-thr', '0.3'])
    return sorted(osp.join(root, f) for root, _, files in os.walk(out_dir)
                  for f in files if f.endswith('.png') and f != 'chelsea.png')


@cli_main('demo.py')
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--data-root', default='data/mini')
    parser.add_argument('--work-dir', default='work_dirs/demo')
    parser.add_argument(
        '--iters', type=int, default=None,
        help='override the number of training iterations per transfer stage')
    parser.add_argument(
        '--pretrain-iters', type=int, default=None,
        help='override the number of DropPos pretraining iterations')
    parser.add_argument(
        '--from-scratch', action='store_true',
        help='skip pretraining: transfer stages start from random weights')
    args = parser.parse_args(argv)

    ensure_mini_data(args.data_root)
    run_dir = osp.join(args.work_dir, time.strftime('%Y%m%d_%H%M%S'))
    results = {}
    backbone = pretrained = None
    if not args.from_scratch:
        backbone, pretrained, results['pretraining'] = pretrain(args, run_dir)
    transfer_checkpoints = {}
    for name, config, keys in STAGES:
        work_dir = osp.join(run_dir, name)
        data_root = osp.join(args.data_root, 'coco' if name == 'detection'
                             else 'ade') + '/'
        if name == 'detection':
            ann = osp.join(data_root, 'annotations/instances_val2017.json')
            options = [
                f'train_dataloader.dataset.data_root={data_root}',
                f'val_dataloader.dataset.data_root={data_root}',
                f'test_dataloader.dataset.data_root={data_root}',
                f'val_evaluator.ann_file={ann}',
                f'test_evaluator.ann_file={ann}',
            ]
        else:
            options = [
                f'{split}_dataloader.dataset.data_root={data_root}'
                for split in ('train', 'val', 'test')
            ]
        if backbone:
            options.append(f'model.backbone.init_cfg.checkpoint={backbone}')
        if args.iters:
            options += [f'train_cfg.max_iters={args.iters}',
                        f'train_cfg.val_interval={args.iters}']
        start = time.time()
        run([sys.executable, 'tools/train.py', config, '--work-dir',
             work_dir, '--cfg-options', *options])
        with open(osp.join(work_dir, 'last_checkpoint')) as f:
            checkpoint = f.read().strip()
        transfer_checkpoints[name] = (config, checkpoint)
        metrics_file = osp.join(work_dir, 'metrics.json')
        run([sys.executable, 'tools/test.py', config, checkpoint,
             '--work-dir', work_dir, '--out', metrics_file, '--cfg-options',
             *options])
        with open(metrics_file) as f:
            metrics = json.load(f)
        results[name] = {key: round(metrics[key], 4) for key in keys}
        results[name]['minutes'] = round((time.time() - start) / 60, 2)

    print('\n=== mmpos demo results (mini data, CPU) ===')
    for name, metrics in results.items():
        print(f'{name:>13}: ' + ', '.join(f'{k}={v}'
                                          for k, v in metrics.items()))
    with open(osp.join(run_dir, 'results.json'), 'w') as f:
        json.dump(results, f, indent=2)
    print(f'results written to {osp.join(run_dir, "results.json")}')
    # The same table generator that regenerates the papers' tables.
    run([sys.executable, 'tools/paper_tables/gen_tables.py',
         'tools/paper_tables/demo_manifest.yaml', '--work-root', run_dir,
         '--out-dir', osp.join(run_dir, 'tables'), '--print'])
    written = pictures(run_dir, backbone, pretrained, transfer_checkpoints)
    print('pictures: ' + ', '.join(written))


if __name__ == '__main__':
    os.environ.setdefault('OMP_NUM_THREADS', str(os.cpu_count() or 1))
    main()
