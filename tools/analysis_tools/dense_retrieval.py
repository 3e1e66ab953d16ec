"""In-context dense retrieval (Hummingbird) of a frozen backbone (mIoU).

    python tools/analysis_tools/dense_retrieval.py CONFIG CHECKPOINT
        --probe PROBE_CONFIG --work-dir DIR [--data-root ROOT]
        [--size S] [--k 30] [--temperature 0.02] [--seed S] [--pictures N]
        [--prefix backbone.] [--device cpu|cuda]

The backbone comes from CONFIG and CHECKPOINT (``none``: random init), as
for ``knn_eval.py``. PROBE_CONFIG (``configs/dense_probes/retrieval_*.py``)
gives the data (``train_dataloader`` / ``val_dataloader`` datasets, any
mmseg segmentation dataset: ADE20K, VOC, mini-scenes, mini-ADE,
mini-stuff) and ``retrieval_probe`` (input size, ``k``, ``temperature``,
augmented passes, memory size). The last block's patch features of the
training images, over augmented passes drawn with ``--seed``, and their
patch label distributions form the memory; every validation patch is
labelled by its ``k`` nearest memory patches
(:mod:`mmpos.evaluation.dense_retrieval`). No parameter is trained.

Writes ``DIR/metrics.json`` (``retrieval/mIoU``, ``mAcc``, ``aAcc``, from
mmseg's ``IoUMetric``) and ``DIR/result.md``; with ``--pictures N``,
``DIR/retrieval_pictures.png``: image, true and retrieved labels of the
first N validation images.
"""
import os.path as osp

from mmpos.evaluation.dense_suite import probe_parser
from mmpos.guardrails.cli import cli_main


def parse_args(argv=None):
    parser = probe_parser(__doc__, 'retrieval')
    parser.add_argument('--size', type=int)
    parser.add_argument('--k', type=int)
    parser.add_argument('--temperature', type=float)
    parser.add_argument('--seed', type=int, default=0,
                        help="the memory's augmentation draws")
    return parser.parse_args(argv)


def label_pictures(paths, labels, preds, num_classes, ignore, num, path):
    """Image | true labels | retrieved labels rows (one colour per class,
    ignored pixels black)."""
    import numpy as np
    from matplotlib import colormaps

    from mmpos.analysis.pictures import save_png, tile_grid
    from mmpos.apis.features import read_images
    palette = colormaps['tab20'](np.arange(max(num_classes, 1)) % 20)[:, :3]

    def paint(label):
        label = label.numpy()
        out = palette[np.clip(label, 0, num_classes - 1)]
        out[label == ignore] = 0
        return out

    rows = [[img, paint(gt), paint(pred)] for img, gt, pred in zip(
        read_images(paths[:num]), labels, preds)]
    captions = [['image', 'true labels', 'retrieved']] * len(rows)
    return save_png(tile_grid(rows, captions, 128), path)


@cli_main('dense_retrieval.py')
def main(argv=None):
    args = parse_args(argv)
    from mmpos.evaluation.dense_suite import probe_tool
    _, details, paths = probe_tool(
        args, 'retrieval', 'In-context dense retrieval (frozen features)',
        size=args.size, k=args.k, temperature=args.temperature)
    if args.pictures:
        paths += (label_pictures(
            details['paths']['val'], details['gt'], details['pred'],
            len(details['classes']), details['ignore_index'], args.pictures,
            osp.join(args.work_dir, 'retrieval_pictures.png')), )
    print(f'written {", ".join(paths)}')


if __name__ == '__main__':
    main()
