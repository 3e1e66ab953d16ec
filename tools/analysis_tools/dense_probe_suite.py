"""The three dense probes (depth, correspondence, retrieval) of several
inits of one backbone, over seeds: a mean ± std table.

    python tools/analysis_tools/dense_probe_suite.py CONFIG
        --runs "random init=none" "DropPos=s0.pth,s1.pth,s2.pth"
        --work-dir DIR [--seeds 0 1 2] [--data-root data/mini]
        [--probes depth=P.py correspondence=P.py retrieval=P.py]
        [--prefix backbone.] [--device cpu|cuda] [--max-tokens T]

Each run is ``LABEL=CHECKPOINT[,CHECKPOINT...]``: one checkpoint (``none``:
random init) is probed with every seed of ``--seeds`` (seed: the random
init and the depth head's init and batches); ``len(seeds)`` checkpoints
(e.g. pretrainings with those seeds) are paired with the seeds in order.
The probes are the mini-data configs by default
(:data:`mmpos.evaluation.dense_suite.MINI_PROBES`, 64 px); ``--data-root``
is the folder holding ``nyu``, ``spair`` and ``scenes``. ``--max-tokens
T`` (a RoPE ViT): every probe, the raw pixels' included, on NaFlex maps,
each image at its aspect ratio within ``T`` patches (the probes' tools'
``--max-tokens``); the image-free baselines stay at the probes' square
sizes.

Beside the runs, every table has the probes' baselines from the same
code: ``image-free`` (what never looks at the image: the per-pixel depth
prior, keypoints left where they were, the per-pixel class prior;
:func:`mmpos.evaluation.dense_suite.image_free_run`) and ``raw pixels``
(the patchified image through the same probe). A probe is informative
only when the best run from a checkpoint beats its image-free baseline
(paired t over the seeds, Holm over the probes,
:func:`~mmpos.evaluation.dense_suite.informative`); the differences of a
probe that is not are shown, marked, and not to be read as a ranking.

Writes ``DIR/results.json`` (every run's metrics per seed) and
``DIR/result.md`` (mean ± std over seeds of the headline metrics, the
difference of each run to the first with its 95 % interval and p: the
paired t over the seeds, which the runs share, adjusted by Holm over the
table, :mod:`mmpos_stats`; then the informativeness tests).
"""
import argparse
import json
import os
import os.path as osp
import time

import mmpos_stats as stats
from mmpos.checkpoint import write_atomically
from mmpos.guardrails.cli import cli_main
from mmpos.errors import BadInputError

IMAGE_FREE, RAW_PIXELS = 'image-free', 'raw pixels'  # the baselines' rows
BASELINES = (IMAGE_FREE, RAW_PIXELS)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config')
    parser.add_argument('--runs', nargs='+', required=True,
                        help='LABEL=CHECKPOINT[,CHECKPOINT...]')
    parser.add_argument('--work-dir', required=True)
    parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    parser.add_argument('--data-root', help='folder of nyu, spair, scenes')
    parser.add_argument('--probes', nargs='+', default=[],
                        help='NAME=PROBE_CONFIG (default: the mini ones)')
    parser.add_argument('--prefix', default='backbone.')
    parser.add_argument('--device', default='cpu')
    parser.add_argument('--max-tokens', type=int,
                        help='NaFlex: each image at its aspect ratio within '
                        'this many patches (a RoPE ViT)')
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
    """Markdown: mean ± std per row (the baselines first) and headline
    metric, the difference of every run to the first run (paired t over
    the seeds, Holm over the table,
    :func:`~mmpos_stats.format_cell`) and, under it, the family
    and the minimum detectable differences."""
    from mmpos.evaluation.dense_suite import HEADLINE
    labels = list(results)
    values = {(label, key): [results[label][str(s)][key] for s in seeds]
              for label in labels for key in HEADLINE}
    lines = [f'| init | {" | ".join(HEADLINE)} |',
             '| --- |' + ' --- |' * len(HEADLINE)]
    for label in labels:
        cells = [stats.format_mean_std(*stats.mean_std(values[label, k]), 3)
                 for k in HEADLINE]
        lines.append(f'| {label} | {" | ".join(cells)} |')
    runs = [label for label in labels if label not in BASELINES]
    tests = iter(stats.family([
        stats.paired(values[label, k], values[runs[0], k])
        for label in runs[1:] for k in HEADLINE], stats.HOLM))
    columns = {k: [] for k in HEADLINE}
    for label in runs[1:]:
        cells = []
        for k in HEADLINE:
            columns[k].append(next(tests))
            cells.append(stats.format_cell(columns[k][-1], 3))
        lines.append(f'| {label} − {runs[0]} | {" | ".join(cells)} |')
    if runs[1:]:
        lines += ['', 'Test: paired t over the seeds (the runs of one seed '
                  'share its draws, e.g. the order of the batches). ' +
                  stats.describe(columns, 3)]
    return '\n'.join(lines)


def informative_lines(results, seeds, trained):
    """One line per probe: whether the best of the ``trained`` runs beats
    the image-free baseline on the probe's deciding metric
    (:func:`~mmpos.evaluation.dense_suite.informative`)."""
    from mmpos.evaluation.dense_suite import PROBES, informative
    found = informative(
        {label: [results[label][str(s)] for s in seeds] for label in trained},
        results[IMAGE_FREE][str(seeds[0])])
    lines = []
    for probe, (ok, best, test, lower) in found.items():
        key = f'{probe}/{PROBES[probe].deciding}'
        what = (f'informative: {best} beats the image-free baseline'
                if ok else 'NOT INFORMATIVE: no run from a checkpoint beats '
                'the image-free baseline; its differences are not a ranking')
        lines.append(f'- {probe}: {what} ({key}, {best} − {IMAGE_FREE} '
                     f'{stats.format_cell(test, 3)}'
                     f'{", lower is better" if lower else ""}).')
    if lines:
        lines.insert(0, 'Is each probe informative? (the best run from a '
                     'checkpoint against the image-free baseline, paired t '
                     'over the seeds, Holm over the probes)')
    return lines


def markdown(results, seeds) -> str:
    """The table (:func:`table`) and the informativeness lines of the
    runs from checkpoints (every seed's, not random init), from the values
    ``results.json`` stores."""
    trained = [label for label, runs in results.items()
               if label not in BASELINES and
               all(run.get('checkpoint') for run in runs.values())]
    return (table(results, seeds) + '\n\n' +
            '\n'.join(informative_lines(results, seeds, trained)) + '\n')


@cli_main('dense_probe_suite.py')
def main(argv=None):
    args = parse_args(argv)
    from mmpos.evaluation.dense_suite import (MINI_PROBES, PROBES,
                                              RAW_PIXELS as PIXELS,
                                              image_free_probes,
                                              run_dense_probes)
    probes = dict(MINI_PROBES)
    probes.update(p.split('=', 1) for p in args.probes)
    runs = parse_runs(args.runs, args.seeds)
    if osp.exists(osp.join(args.work_dir, 'results.json')):
        raise FileExistsError(f'{args.work_dir}/results.json exists; choose '
                              'another work dir')
    os.makedirs(args.work_dir, exist_ok=True)
    roots = {name: osp.join(args.data_root, PROBES[name].data)
             for name in probes} if args.data_root else None
    results, start = {}, time.time()
    image_free = image_free_probes(probes, roots)
    results[IMAGE_FREE] = {str(seed): image_free for seed in args.seeds}
    for label, pairs in [(RAW_PIXELS, [(seed, PIXELS)
                                       for seed in args.seeds])] + runs:
        results[label] = {}
        for seed, ckpt in pairs:
            results[label][str(seed)] = dict(
                run_dense_probes(args.config, ckpt, probes, seed, roots,
                                 args.prefix, args.device,
                                 max_tokens=args.max_tokens),
                checkpoint=ckpt)
            print(f'{label} seed {seed}: ' + ', '.join(
                f'{k} {v:.3f}' for k, v in results[label][str(seed)].items()
                if k != 'checkpoint' and '/' in k), flush=True)
    naflex = {} if args.max_tokens is None else dict(
        max_tokens=args.max_tokens)
    write_atomically(json.dumps(dict(
        config=args.config, probes=probes, seeds=args.seeds, **naflex,
        results=results), indent=1).encode(),
        osp.join(args.work_dir, 'results.json'))
    text = (f'# Dense probes of {args.config}\n\nseeds {args.seeds}; ' +
            (f'NaFlex, max_tokens {args.max_tokens}; ' if naflex else '') +
            f'{round((time.time() - start) / 60, 1)} min\n\n' +
            markdown(results, args.seeds))
    write_atomically(text.encode(), osp.join(args.work_dir, 'result.md'))
    print(text)


if __name__ == '__main__':
    main()
