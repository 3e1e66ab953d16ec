"""The three dense probes (depth, correspondence, retrieval) of several
inits of one backbone, over seeds: a mean ± std table.

    python tools/analysis_tools/dense_probe_suite.py CONFIG
        --runs "random init=none" "DropPos=s0.pth,s1.pth,s2.pth"
        --work-dir DIR [--seeds 0 1 2] [--data-root data/mini]
        [--probes depth=P.py correspondence=P.py retrieval=P.py]
        [--prefix backbone.] [--device cpu|cuda]

Each run is ``LABEL=CHECKPOINT[,CHECKPOINT...]``: one checkpoint (``none``:
random init) is probed with every seed of ``--seeds`` (seed: the random
init and the depth head's init and batches); ``len(seeds)`` checkpoints
(e.g. pretrainings with those seeds) are paired with the seeds in order.
The probes are the mini-data configs by default
(:data:`mmpos.evaluation.dense_suite.MINI_PROBES`, 64 px); ``--data-root``
is the folder holding ``nyu``, ``spair`` and ``stuff``.

Writes ``DIR/results.json`` (every run's metrics per seed) and
``DIR/result.md`` (mean ± std over seeds of the headline metrics, and the
difference of each run to the first).
"""
import argparse
import json
import os
import os.path as osp
import statistics
import sys
import time

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(
    __file__)))))

from mmpos.checkpoint import write_atomically  # noqa: E402
from mmpos.utils.cli import cli_main  # noqa: E402
from mmpos.utils.errors import BadInputError  # noqa: E402

DATA_DIRS = dict(depth='nyu', correspondence='spair', retrieval='stuff')


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config')
    parser.add_argument('--runs', nargs='+', required=True,
                        help='LABEL=CHECKPOINT[,CHECKPOINT...]')
    parser.add_argument('--work-dir', required=True)
    parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    parser.add_argument('--data-root', help='folder of nyu, spair, stuff')
    parser.add_argument('--probes', nargs='+', default=[],
                        help='NAME=PROBE_CONFIG (default: the mini ones)')
    parser.add_argument('--prefix', default='backbone.')
    parser.add_argument('--device', default='cpu')
    return parser.parse_args(argv)


def parse_runs(runs, seeds):
    """``[(label, [(seed, checkpoint or None), ...]), ...]``."""
    out = []
    for run in runs:
        label, sep, ckpts = run.partition('=')
        ckpts = [None if c == 'none' else c for c in ckpts.split(',')]
        if not sep or not label or len(ckpts) not in (1, len(seeds)):
            raise BadInputError(f'--runs {run!r}: LABEL=CHECKPOINT with 1 '
                                f'or {len(seeds)} (one per seed) checkpoints')
        for ckpt in ckpts:
            if ckpt is not None and not osp.isfile(ckpt):
                raise FileNotFoundError(f'checkpoint not found: {ckpt}')
        out.append((label, list(zip(seeds, ckpts * len(seeds)
                                    if len(ckpts) == 1 else ckpts))))
    return out


def table(results, seeds):
    """Markdown: mean ± std per run and headline metric, and the
    difference to the first run."""
    from mmpos.evaluation.dense_suite import HEADLINE
    labels = list(results)
    lines = [f'| init | {" | ".join(HEADLINE)} |',
             '| --- |' + ' --- |' * len(HEADLINE)]
    stats = {}
    for label in labels:
        cells = []
        for key in HEADLINE:
            values = [results[label][str(s)][key] for s in seeds]
            mean = statistics.mean(values)
            std = statistics.stdev(values) if len(values) > 1 else 0.
            stats[label, key] = mean
            cells.append(f'{mean:.3f} ± {std:.3f}')
        lines.append(f'| {label} | {" | ".join(cells)} |')
    for label in labels[1:]:
        cells = [f'{stats[label, k] - stats[labels[0], k]:+.3f}'
                 for k in HEADLINE]
        lines.append(f'| {label} − {labels[0]} | {" | ".join(cells)} |')
    return '\n'.join(lines)


@cli_main('dense_probe_suite.py')
def main(argv=None):
    args = parse_args(argv)
    from mmpos.evaluation.dense_suite import MINI_PROBES, run_dense_probes
    probes = dict(MINI_PROBES)
    probes.update(p.split('=', 1) for p in args.probes)
    runs = parse_runs(args.runs, args.seeds)
    if osp.exists(osp.join(args.work_dir, 'results.json')):
        raise FileExistsError(f'{args.work_dir}/results.json exists; choose '
                              'another work dir')
    os.makedirs(args.work_dir, exist_ok=True)
    roots = {name: osp.join(args.data_root, DATA_DIRS[name])
             for name in probes} if args.data_root else None
    results, start = {}, time.time()
    for label, pairs in runs:
        results[label] = {}
        for seed, ckpt in pairs:
            results[label][str(seed)] = dict(
                run_dense_probes(args.config, ckpt, probes, seed, roots,
                                 args.prefix, args.device),
                checkpoint=ckpt)
            print(f'{label} seed {seed}: ' + ', '.join(
                f'{k} {v:.3f}' for k, v in results[label][str(seed)].items()
                if k != 'checkpoint' and '/' in k), flush=True)
    write_atomically(json.dumps(dict(
        config=args.config, probes=probes, seeds=args.seeds,
        results=results), indent=1).encode(),
        osp.join(args.work_dir, 'results.json'))
    text = (f'# Dense probes of {args.config}\n\nseeds {args.seeds}; '
            f'{round((time.time() - start) / 60, 1)} min\n\n' +
            table(results, args.seeds) + '\n')
    write_atomically(text.encode(), osp.join(args.work_dir, 'result.md'))
    print(text)


if __name__ == '__main__':
    main()
