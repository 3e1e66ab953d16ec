"""Train and test a linear segmentation probe of a frozen backbone.

    python tools/analysis_tools/linear_seg_probe.py CONFIG BACKBONE
        --work-dir DIR [--cfg-options KEY=VALUE ...]

CONFIG is a linear-probe config (``configs/transfer/mmseg/linear-probe_*``
or ``configs/demo/linear-probe_*``: frozen backbone, BN + 1x1 conv head),
BACKBONE the pretrained checkpoint (``model.backbone.init_cfg.checkpoint``)
or ``pixels``: the raw-pixel baseline, the patches' pixels
(:class:`~mmpos.models.backbones.PixelPatches` with the backbone's patch
size, ``3 p^2`` channels per cell) through the same head and schedule
(``DIR/pixels_<config>``: CONFIG with that backbone).
Runs ``tools/train.py`` and then ``tools/test.py --out DIR/metrics.json`` on
the last checkpoint, and writes ``DIR/result.md`` (mIoU, mAcc, aAcc and the
training seconds per 1k images: median logged iteration time / batch
size). ``metrics.json`` is what ``tools/paper_tables/gen_tables.py`` reads.
"""
import argparse
import json
import os
import os.path as osp
import statistics
import subprocess
import sys

from mmpos.guardrails.cli import cli_main

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config')
    parser.add_argument('backbone')
    parser.add_argument('--work-dir', required=True)
    parser.add_argument('--cfg-options', nargs='+', default=[])
    return parser.parse_args(argv)


def run(cmd):
    proc = subprocess.run([sys.executable, *cmd], cwd=ROOT)
    if proc.returncode:
        sys.exit(proc.returncode)  # the tool printed its one-line error


def pixel_config(config: str, work_dir: str) -> str:
    """``<work_dir>/pixels_<config name>``: ``config`` with the raw-pixel
    backbone (PixelPatches, the config backbone's patch size, a feature
    map of ``3 p^2`` channels), the head widened to it and mmengine's
    optimizer constructor (the layer-wise one needs a ViT; the head has
    one layer, so the same rates); returns its path."""
    from mmpos.apis.features import backbone_config
    patch = backbone_config(config).get('patch_size', 16)
    os.makedirs(work_dir, exist_ok=True)
    path = osp.join(work_dir, 'pixels_' + osp.basename(config))
    with open(path, 'w') as f:
        f.write(f"_base_ = [{osp.abspath(config)!r}]\n"
                "model = dict(\n"
                "    backbone=dict(_delete_=True, type='mmpretrain."
                f"PixelPatches', patch_size={patch}, out_type='featmap'),\n"
                f"    decode_head=dict(in_channels={3 * patch**2}, "
                f"channels={3 * patch**2}))\n"
                "optim_wrapper = dict(\n"
                "    constructor='DefaultOptimWrapperConstructor',\n"
                "    paramwise_cfg=dict(_delete_=True, norm_decay_mult=0.0, "
                "flat_decay_mult=0.0))\n")
    return path


@cli_main('linear_seg_probe.py')
def main(argv=None):
    args = parse_args(argv)
    from mmengine.config import Config, DictAction

    from mmpos.analysis.logs import training_records
    from mmpos.evaluation.frozen import write_markdown
    from mmpos.evaluation.dense_suite import RAW_PIXELS
    if args.backbone != RAW_PIXELS and not osp.isfile(args.backbone):
        raise FileNotFoundError(f'backbone checkpoint not found: '
                                f'{args.backbone}')
    if osp.exists(osp.join(args.work_dir, 'metrics.json')):
        raise FileExistsError(f'{args.work_dir}/metrics.json exists; choose '
                              'another work dir')
    options = list(args.cfg_options)
    if args.backbone == RAW_PIXELS:
        args.config = pixel_config(args.config, args.work_dir)
    else:
        options.insert(0,
                       f'model.backbone.init_cfg.checkpoint={args.backbone}')
    run(['tools/train.py', args.config, '--work-dir', args.work_dir,
         '--cfg-options', *options])
    with open(osp.join(args.work_dir, 'last_checkpoint')) as f:
        checkpoint = f.read().strip()
    metrics_file = osp.join(args.work_dir, 'metrics.json')
    run(['tools/test.py', args.config, checkpoint, '--work-dir',
         args.work_dir, '--out', metrics_file, '--cfg-options', *options])
    with open(metrics_file) as f:
        metrics = json.load(f)
    cfg = Config.fromfile(args.config)
    parser = argparse.ArgumentParser()
    parser.add_argument('--o', nargs='+', action=DictAction, default={})
    cfg.merge_from_dict(parser.parse_args(['--o', *options]).o)
    batch = cfg.train_dataloader.batch_size
    step = statistics.median(r['time'] for r in training_records(
        args.work_dir) if 'time' in r)  # s per iteration, as logged
    settings = dict(config=args.config, backbone=args.backbone,
                    checkpoint=checkpoint, train_iters=cfg.train_cfg.max_iters,
                    batch_size=batch,
                    train_seconds_per_1k_images=round(1000 * step / batch, 1))
    keys = [k for k in ('mIoU', 'mAcc', 'aAcc') if k in metrics]
    path = write_markdown(osp.join(args.work_dir, 'result.md'),
                          'Linear segmentation probe (frozen backbone)',
                          {k: metrics[k] for k in keys}, settings)
    print(', '.join(f'{k} {metrics[k]:.2f}' for k in keys) +
          f'; written {metrics_file}, {path}')


if __name__ == '__main__':
    main()
