"""Loss / lr / metric curves of several runs in one figure.

    python tools/analysis_tools/plot_curves.py WORK_DIR [WORK_DIR ...]
        [--keys loss lr coco/bbox_mAP] [--labels A B] [--out-dir DIR]

Reads every ``<work_dir>/<timestamp>/vis_data/scalars.json`` (resumed runs
have several, read in order) and draws one panel per key, one line per run,
against the ``step`` of each record (training records for training keys,
validation records for metrics). Writes ``curves.csv`` (run, key, step,
value) and ``curves.png``. A key no run logged is reported and skipped.
"""
import argparse
import csv
import io
import os.path as osp
import sys

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402

from mmpos.analysis.logs import load_scalars, scalar_files  # noqa: E402
from mmpos.analysis.pictures import save_figure  # noqa: E402
from mmpos.checkpoint import write_atomically  # noqa: E402
from mmpos.guardrails.cli import cli_main  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('work_dirs', nargs='+')
    parser.add_argument('--keys', nargs='+', default=['loss', 'lr'])
    parser.add_argument('--labels', nargs='+')
    parser.add_argument('--out-dir', default='work_dirs/analysis')
    return parser.parse_args(argv)


def series(work_dir, key):
    """``[(step, value)]`` of ``key`` over all logs of a work dir."""
    files = scalar_files(work_dir)
    if not files:
        raise SystemExit(f'{work_dir}: no <timestamp>/vis_data/scalars.json')
    return [(r.get('step', i), float(r[key]))
            for f in files for i, r in enumerate(load_scalars(f)) if key in r]


@cli_main('plot_curves.py')
def main(argv=None):
    args = parse_args(argv)
    labels = args.labels or [osp.basename(osp.normpath(d))
                             for d in args.work_dirs]
    if len(labels) != len(args.work_dirs):
        raise SystemExit(f'{len(labels)} --labels for '
                         f'{len(args.work_dirs)} work dirs')
    data = {(label, key): series(d, key)
            for label, d in zip(labels, args.work_dirs) for key in args.keys}
    keys = [k for k in args.keys if any(data[(lb, k)] for lb in labels)]
    for key in set(args.keys) - set(keys):
        print(f'warning: no run logged {key!r}; skipped', file=sys.stderr)
    if not keys:
        raise SystemExit('none of the --keys is in the logs')
    stem = osp.join(args.out_dir, 'curves')
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(['run', 'key', 'step', 'value'])
    for (label, key), points in data.items():
        writer.writerows([label, key, s, v] for s, v in points)
    write_atomically(text.getvalue().encode(), stem + '.csv')
    fig, axes = plt.subplots(1, len(keys), figsize=(5 * len(keys), 3.8),
                             squeeze=False)
    for ax, key in zip(axes[0], keys):
        for label in labels:
            points = data[(label, key)]
            if points:
                ax.plot(*zip(*points), 'o-' if len(points) < 20 else '-',
                        label=label)
        ax.set_title(key)
        ax.set_xlabel('step')
        ax.legend()
    fig.tight_layout()
    save_figure(fig, stem + '.png', dpi=100)
    print(f'wrote {stem}.csv and .png')


if __name__ == '__main__':
    main()
