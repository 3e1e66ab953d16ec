"""Zero-shot keypoint correspondence of a frozen backbone (PCK).

    python tools/analysis_tools/keypoint_correspondence.py CONFIG CHECKPOINT
        --probe PROBE_CONFIG --work-dir DIR [--data-root ROOT]
        [--split test] [--by bbox|image] [--size S] [--categories C ...]
        [--pictures N] [--prefix backbone.] [--device cpu|cuda]

The backbone comes from CONFIG and CHECKPOINT (``none``: random init), as
for ``knn_eval.py``. PROBE_CONFIG (``configs/dense_probes/
correspondence_*.py``) gives ``data_root`` (SPair-71k's layout:
``PairAnnotation/<split>/*.json``, ``JPEGImages/<category>/``) and
``correspondence_probe`` (split, input size, PCK threshold from the target
``bbox`` or ``image``, alphas). Each source keypoint is matched to the
target patch of most similar feature (:mod:`mmpos.evaluation.
correspondence`).

Writes ``DIR/metrics.json`` (``correspondence/pck@0.05``, ``pck@0.1``, in
percent over all keypoints) and ``DIR/result.md``; with ``--pictures N``,
``DIR/matches.png``: the first N pairs, source and target side by side, a
line per keypoint to its match (green: within 0.1 of the threshold).
"""
import os.path as osp

from mmpos.evaluation.dense_suite import probe_parser
from mmpos.guardrails.cli import cli_main


def parse_args(argv=None):
    parser = probe_parser(__doc__, 'correspondence')
    parser.add_argument('--split')
    parser.add_argument('--by', choices=['bbox', 'image'])
    parser.add_argument('--size', type=int)
    parser.add_argument('--categories', nargs='+')
    return parser.parse_args(argv)


def match_pictures(pairs, preds, by, hws, num, path):
    """One row per pair: source | target with the matches drawn."""
    import numpy as np

    from mmpos.analysis.pictures import draw_matches, save_png
    from mmpos.apis.features import read_images
    from mmpos.evaluation.correspondence import pck_hits, pck_threshold
    rows = []
    for pair, pred, (_, trg_hw) in list(zip(pairs, preds, hws))[:num]:
        src, trg = read_images([pair['src_img'], pair['trg_img']])
        hit = pck_hits(pred, pair['trg_kps'], pck_threshold(
            pair['trg_bbox'], trg_hw, by), (0.1, ))[0.1]
        rows.append(draw_matches(src, trg, pair['src_kps'], pred, hit))
    return save_png(np.concatenate(rows, 0), path)


@cli_main('keypoint_correspondence.py')
def main(argv=None):
    args = parse_args(argv)
    from mmpos.evaluation.dense_suite import probe_tool
    _, details, paths = probe_tool(
        args, 'correspondence', 'Keypoint correspondence (frozen features)',
        categories=args.categories, split=args.split, by=args.by,
        size=args.size)
    if args.pictures:
        paths += (match_pictures(
            details['pairs'], details['preds'], details['settings']['by'],
            details['hws'], args.pictures,
            osp.join(args.work_dir, 'matches.png')), )
    print(f'written {", ".join(paths)}')


if __name__ == '__main__':
    main()
