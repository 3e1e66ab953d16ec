"""Linear monocular-depth probe of a frozen backbone (DINOv2 protocol).

    python tools/analysis_tools/depth_probe.py CONFIG CHECKPOINT
        --probe PROBE_CONFIG --work-dir DIR [--data-root ROOT]
        [--blocks 1|4] [--no-cls-token] [--iters N] [--seed S]
        [--pictures N] [--prefix backbone.] [--device cpu|cuda]
        [--max-tokens T]

The backbone comes from CONFIG (any mmpos / mmpretrain / mmdet / mmseg
config) and CHECKPOINT (``none``: random init), as for ``knn_eval.py``.
PROBE_CONFIG (``configs/dense_probes/depth_*.py``) gives the data (its
``train_dataloader`` / ``val_dataloader`` datasets, mmseg's ``NYUDataset``
layout), the evaluation (its ``val_evaluator``, mmseg's ``DepthMetric``)
and ``depth_probe`` (blocks, class token, input size, DINOv2's head: 256
uniform bins in [1e-3, 10] m, x4 bilinear upsampling; the schedule).
Frozen features of all images are computed once; the linear head trains on
them (:mod:`mmpos.evaluation.depth_probe`).

``--max-tokens T`` (a RoPE ViT): NaFlex maps instead of squares of the
config's size: each image resized at its aspect ratio within ``T``
patches, the images of a batch padded to one sequence with a key mask,
each image's depth map resized (nearest) to its image's size and its depth
predicted and scored at it (:func:`mmpos.evaluation.dense_suite.depth_run`;
the image-free baselines stay at the square size).

Writes ``DIR/metrics.json`` (``depth/rmse``, ``depth/abs_rel``,
``depth/d1`` ... as mmseg's ``DepthMetric`` gives them) and
``DIR/result.md``; with ``--pictures N``, ``DIR/depth_pictures.png``: for
the first N validation images, the image, the true and the predicted depth
(one colour scale per row: the true depth's range).
"""
import os.path as osp

from mmpos.evaluation.dense_suite import probe_parser
from mmpos.guardrails.cli import cli_main


def parse_args(argv=None):
    parser = probe_parser(__doc__, 'depth')
    parser.add_argument('--blocks', type=int, choices=[1, 4])
    parser.add_argument('--no-cls-token', action='store_true')
    parser.add_argument('--iters', type=int)
    parser.add_argument('--seed', type=int, default=0,
                        help='seed of the head init and batch draws')
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
    from mmpos.evaluation.dense_suite import probe_tool
    _, details, paths = probe_tool(
        args, 'depth', 'Linear depth probe (frozen features)',
        blocks=args.blocks, iters=args.iters,
        cls_token=False if args.no_cls_token else None)
    if args.pictures:
        paths += (depth_pictures(
            details['paths']['val'], details['gt'], details['pred'],
            args.pictures, osp.join(args.work_dir, 'depth_pictures.png')), )
    print(f'written {", ".join(paths)}')


if __name__ == '__main__':
    main()
