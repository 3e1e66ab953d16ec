"""Linear monocular-depth probe of a frozen backbone (DINOv2 protocol).

    python tools/analysis_tools/depth_probe.py CONFIG CHECKPOINT
        --probe PROBE_CONFIG --work-dir DIR [--data-root ROOT]
        [--blocks 1|4] [--no-cls-token] [--iters N] [--seed S]
        [--pictures N] [--prefix backbone.] [--device cpu|cuda]

The backbone comes from CONFIG (any mmpos / mmpretrain / mmdet / mmseg
config) and CHECKPOINT (``none``: random init), as for ``knn_eval.py``.
PROBE_CONFIG (``configs/dense_probes/depth_*.py``) gives the data (its
``train_dataloader`` / ``val_dataloader`` datasets, mmseg's ``NYUDataset``
layout), the evaluation (its ``val_evaluator``, mmseg's ``DepthMetric``)
and ``depth_probe`` (blocks, class token, input size, DINOv2's head: 256
uniform bins in [1e-3, 10] m, x4 bilinear upsampling; the schedule).
Frozen features of all images are computed once; the linear head trains on
them (:mod:`mmpos.evaluation.depth_probe`).

Writes ``DIR/metrics.json`` (``depth/rmse``, ``depth/abs_rel``,
``depth/d1`` ... as mmseg's ``DepthMetric`` gives them) and
``DIR/result.md``; with ``--pictures N``, ``DIR/depth_pictures.png``: for
the first N validation images, the image, the true and the predicted depth
(one colour scale per row: the true depth's range).
"""
import os.path as osp
import sys
import time

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(
    __file__)))))

from mmpos.apis.cli import backbone_parser  # noqa: E402
from mmpos.utils.cli import cli_main  # noqa: E402


def parse_args(argv=None):
    parser = backbone_parser(__doc__, images=False)
    parser.add_argument('--probe', required=True,
                        help='configs/dense_probes/depth_*.py')
    parser.add_argument('--work-dir', required=True)
    parser.add_argument('--data-root', help='data_root of both splits')
    parser.add_argument('--blocks', type=int, choices=[1, 4])
    parser.add_argument('--no-cls-token', action='store_true')
    parser.add_argument('--iters', type=int)
    parser.add_argument('--seed', type=int, default=0,
                        help='seed of the head init and batch draws')
    parser.add_argument('--pictures', type=int, default=4)
    parser.add_argument('--batch-size', type=int, default=32)
    return parser.parse_args(argv)


def depth_pictures(paths, depths, preds, num, path):
    """Image | true depth | predicted depth rows (colour range of the true
    depth)."""
    import numpy as np

    from mmpos.analysis.pictures import colorize, save_png, tile_grid
    from mmpos.apis.features import read_images
    rows = []
    for img, gt, pred in zip(read_images(paths[:num]), depths, preds):
        both = colorize(np.concatenate([gt.numpy(), pred.numpy()], 1),
                        'magma_r')
        rows.append([img, both[:, :gt.shape[1]], both[:, gt.shape[1]:]])
    captions = [['image', 'true depth', 'predicted']] * len(rows)
    return save_png(tile_grid(rows, captions, 128), path)


@cli_main('depth_probe.py')
def main(argv=None):
    args = parse_args(argv)
    from mmengine.config import Config

    from mmpos.apis.features import data_mean_std
    from mmpos.evaluation.dense import (probe_backbone, probe_settings,
                                        split_features)
    from mmpos.evaluation.depth_probe import (DEPTH_PROBE, FIT_KEYS,
                                              HEAD_KEYS, depth_eval_settings,
                                              depth_split, run_depth_probe)
    from mmpos.evaluation.frozen import write_result
    for name in ('metrics.json', 'result.md'):
        if osp.exists(osp.join(args.work_dir, name)):
            raise FileExistsError(f'{osp.join(args.work_dir, name)} exists; '
                                  'choose another work dir')
    cfg = Config.fromfile(args.probe)
    settings = probe_settings(
        cfg, 'depth_probe', DEPTH_PROBE, blocks=args.blocks,
        iters=args.iters, cls_token=False if args.no_cls_token else None)
    backbone = probe_backbone(args.config, args.checkpoint,
                              settings['blocks'], args.device, args.prefix)
    mean, std = data_mean_std(args.config)
    start = time.perf_counter()
    data = {}
    for split in ('train', 'val'):
        paths, depths = depth_split(
            cfg, split, settings['size'], args.data_root,
            settings['max_train_images'] if split == 'train' else None)
        data[split] = (paths, split_features(
            backbone, paths, settings['size'], mean, std, args.batch_size,
            args.device), depths)
    seconds_features = time.perf_counter() - start
    probe = {k: settings[k] for k in HEAD_KEYS + FIT_KEYS}
    metrics, pred = run_depth_probe(
        data['train'][1], data['train'][2], data['val'][1], data['val'][2],
        seed=args.seed, cls_token=settings['cls_token'], **probe,
        **depth_eval_settings(cfg))
    metrics = {f'depth/{k}': float(v) for k, v in metrics.items()}
    settings_out = dict(
        config=args.config, checkpoint=args.checkpoint, probe=args.probe,
        train_images=len(data['train'][0]),
        val_images=len(data['val'][0]),
        blocks=list(backbone.out_indices),
        seed=args.seed, **{k: settings[k] for k in ('cls_token', 'size')},
        **probe, **depth_eval_settings(cfg),
        feature_seconds=round(seconds_features, 1),
        seconds=round(time.perf_counter() - start, 1))
    paths = write_result(args.work_dir, metrics,
                         'Linear depth probe (frozen features)', settings_out)
    if args.pictures:
        paths += (depth_pictures(data['val'][0], data['val'][2], pred,
                                 args.pictures, osp.join(
                                     args.work_dir, 'depth_pictures.png')), )
    for key in ('depth/rmse', 'depth/abs_rel', 'depth/d1'):
        print(f'{key}: {metrics[key]:.4f}')
    print(f'written {", ".join(paths)}')


if __name__ == '__main__':
    main()
