"""Regenerate the paper tables from finished work dirs.

    python tools/paper_tables/gen_tables.py MANIFEST [--work-root DIR]
        [--out-dir DIR] [--tables ID ...] [--paper NAME] [--print] [--check]
    python tools/paper_tables/gen_tables.py --seeds DIR|SUMMARY [--out-dir DIR]
        [--print]
    python tools/paper_tables/gen_tables.py --demo RUN_DIR [THREADS_RUN_DIR]
    python tools/paper_tables/gen_tables.py --demo-confirm RUN_DIR

For every table of MANIFEST (default ``tools/paper_tables/manifest.yaml``)
writes ``<out-dir>/<table>.md`` and ``.csv`` plus ``<out-dir>/tables.md``:
our number, the paper's and the delta side by side; runs that do not exist
yet are marked, never an error. A run's work dir is ``<work-root>/<run id>``.
The docs site renders the same tables at build time (``make docs``).
``--seeds DIR`` instead regenerates a seed-repeated comparison of backbone
initialisations (``tools/demo.py``, ``tools/paper_tables/method_ranking.py``)
from ``DIR/plan.json`` and its work dirs, or from the raw values of a
stored ``summary.json`` (``--seeds SUMMARY``, nothing re-run): one table
ranked with rank intervals, ``mean ± std`` per metric, the difference to
random init with its interval and Holm-adjusted p
(:mod:`mmpos_stats`) and the compute, written as ``seeds.md`` /
``seeds.csv`` / ``summary.json`` (and ``orderings.md`` when the plan claims
orderings) to ``--out-dir`` (default ``DIR/tables``, or the summary's
folder); see :mod:`mmpos_harness.comparison.seeds`.
``--demo RUN_DIR`` stores a finished demo run as the README's result files
and rewrites the README's table from them (:mod:`mmpos_harness.demo_table`);
``--demo-confirm RUN_DIR`` stores the demo run on
``designs/demo_confirm.yaml``'s fresh seeds and rewrites the demo page's
confirmation block.
``--check`` also fails (exit 1) when a config is missing without being listed
in the manifest's ``pending`` or when the effective-epoch accounting
disagrees with a paper's ``eff_ep``.
"""
import argparse
import os
import os.path as osp
import sys

from mmpos.guardrails.cli import cli_main
from mmpos_harness import demo_table
from mmpos_harness.comparison import seeds
from mmpos_harness.paper_tables.manifest import ManifestError, load_manifest
from mmpos_harness.paper_tables.tables import generate


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('manifest', nargs='?',
                        default='tools/paper_tables/manifest.yaml')
    parser.add_argument('--work-root', default='work_dirs/paper_tables')
    parser.add_argument('--out-dir', help='default: <work-root>/tables')
    parser.add_argument('--tables', nargs='+', help='only these table ids')
    parser.add_argument('--paper', help='only the tables of this paper')
    parser.add_argument('--metrics-file', default='metrics.json',
                        help='tools/test.py --out file name in a work dir')
    parser.add_argument('--print', action='store_true',
                        help='print the markdown tables')
    parser.add_argument('--check', action='store_true',
                        help='exit 1 on config / eff. epoch problems')
    parser.add_argument(
        '--seeds', metavar='DIR|SUMMARY',
        help='regenerate the seed comparison in DIR (plan.json) or from a '
        'stored summary.json instead')
    parser.add_argument(
        '--demo', metavar='RUN_DIR', nargs='+',
        help=f'store a finished tools/demo.py run (and, second, a --jobs 1 '
        f'run of its first pretraining seed) as {demo_table.RESULTS}/ and '
        f'regenerate {demo_table.README}\'s demo table from it')
    parser.add_argument(
        '--demo-confirm', metavar='RUN_DIR',
        help=f'store a finished tools/demo.py run on the fresh seeds of '
        f'{demo_table.DESIGN} as {demo_table.CONFIRM}/ and regenerate '
        f'{demo_table.PAGE}\'s confirmation block from it')
    return parser.parse_args(argv)


def seed_table(args):
    out_dir = args.out_dir or (osp.join(args.seeds, 'tables') if osp.isdir(
        args.seeds) else osp.dirname(osp.abspath(args.seeds)))
    os.makedirs(out_dir, exist_ok=True)
    try:
        text = seeds.write(seeds.load(args.seeds), out_dir)
    except (ValueError, FileNotFoundError) as err:
        sys.exit(f'gen_tables.py: error: {err}')
    if args.print:
        print(text)
    print(f'seed table written to {out_dir}')


@cli_main('gen_tables.py')
def main(argv=None):
    args = parse_args(argv)
    if args.demo or args.demo_confirm:
        try:
            print(demo_table.publish(*args.demo[:2]) if args.demo else
                  demo_table.publish_confirmation(args.demo_confirm))
        except (ValueError, FileNotFoundError) as err:
            sys.exit(f'gen_tables.py: error: {err}')
        return None
    if args.seeds:
        return seed_table(args)
    try:
        manifest = load_manifest(args.manifest)
        table_ids = args.tables
        if args.paper:
            table_ids = [t.id for t in manifest.tables
                         if t.paper.lower() == args.paper.lower()]
            if not table_ids:
                raise ManifestError(f'--paper {args.paper!r}: no table; '
                                    'papers: ' + ', '.join(
                                        sorted({t.paper
                                                for t in manifest.tables})))
        out_dir = args.out_dir or osp.join(args.work_root, 'tables')
        filled = generate(manifest, args.work_root, out_dir, table_ids,
                          args.metrics_file)
    except (ManifestError, KeyError, ValueError) as err:
        sys.exit(f'gen_tables.py: error: {err}')
    if args.print:
        with open(osp.join(out_dir, 'tables.md')) as f:
            print(f.read())
    print(f'{len(filled)} tables written to {out_dir}')
    problems = manifest.check_configs() + manifest.check_effective_epochs()
    for problem in problems:
        print(f'warning: {problem}', file=sys.stderr)
    if args.check and problems:
        sys.exit(1)


if __name__ == '__main__':
    main()
