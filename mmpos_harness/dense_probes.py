"""The frozen-evaluation page's dense-probe table, with its provenance.

The demo's recipe (``configs/demo/droppos_vit-tiny-rope-mixed_mini.py``:
the 4-block RoPE-Mixed ViT, 3000 DropPos iterations on the unlabeled mini
views) pretrained once per seed, against random init drawn with the same
seeds and the probes' baselines (image-free, raw pixels), through the
three dense probes on the mini data
(``tools/analysis_tools/dense_probe_suite.py``: depth, correspondence,
retrieval; paired t over the seeds, Holm over the table, informativeness
against the image-free baseline)::

    python tools/paper_tables/dense_probes.py [--work-dir
        work_dirs/dense_probes] [--data-root data/mini] [--seeds 0 1 2]
        [--jobs 2]
    python tools/paper_tables/dense_probes.py --publish RUN_DIR

Steps: the mini data the runs read (:func:`~.comparison.runs.ensure_data`'s
unlabeled views; the probes' folders, :func:`~.comparison.runs.
ensure_probe_data`); one pretraining per seed into
``<work-dir>/pretraining/DropPos/pseed<k>`` (:func:`~.comparison.runs.
pretrain`: a finished one is kept, so the command resumes, and a demo
run's ``pretraining/DropPos`` copied there is reused); the suite into
``<work-dir>/suite``; ``<work-dir>/results.json``: the suite's results and
this run's provenance (:mod:`mmpos_harness.provenance`). ``--publish``
stores ``results.json`` and the table (:func:`page_table`) in
:data:`RESULTS`, which the page includes; ``tests/test_results.py`` fails
when the code or configs in its ``depends`` changed after its commit.
"""
import argparse
import json
import os
import os.path as osp
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from mmpos.checkpoint import write_atomically
from mmpos.evaluation.dense_suite import MINI_PROBES
from mmpos.guardrails.cli import cli_main
from mmpos.guardrails.launch import work_dir_lock

from . import provenance
from .comparison import runs

RESULTS = 'results/dense_probes_mini'
PRETRAIN = 'configs/demo/droppos_vit-tiny-rope-mixed_mini.py'
METHOD = 'DropPos'
SUITE = 'tools/analysis_tools/dense_probe_suite.py'
# the code the table's numbers go through, beside its configs
CODE = ('mmpos/models', 'mmpos/datasets', 'mmpos/engine', 'mmpos/evaluation',
        'mmpos/checkpoint', 'mmpos/apis', 'mmpos_harness/dense_probes.py',
        'mmpos_harness/comparison/runs.py', 'mmpos_harness/mini_data',
        'tools/train.py', 'tools/model_converters/mmpos2backbone.py', SUITE)


def depends():
    """The paths the table depends on: :data:`CODE`, the pretraining and
    probe configs and their bases."""
    configs = [PRETRAIN, runs.TASKS['detection']['config'],
               *MINI_PROBES.values()]
    return sorted({p for c in configs
                   for p in provenance.config_sources(c)} | set(CODE))


def measure(args):
    """Pretrain, run the suite, write ``<work-dir>/results.json``."""
    start = time.time()
    runs.ensure_data(args.data_root)
    runs.ensure_probe_data(args.data_root, list(MINI_PROBES))
    threads = 1 if args.jobs > 1 else None
    with ThreadPoolExecutor(args.jobs) as pool:
        backbones = list(pool.map(
            lambda seed: runs.pretrain(PRETRAIN, args.work_dir, METHOD,
                                       args.data_root, threads=threads,
                                       pretrain_seed=seed), args.seeds))
    suite = osp.join(args.work_dir, 'suite')
    if not osp.isfile(osp.join(suite, 'results.json')):
        runs.run([sys.executable, SUITE, PRETRAIN, '--runs',
                  f'{runs.RANDOM_INIT}=none',
                  f'{METHOD}={",".join(backbones)}', '--seeds',
                  *map(str, args.seeds), '--data-root', args.data_root,
                  '--work-dir', suite])
    with open(osp.join(suite, 'results.json')) as f:
        results = json.load(f)
    results['minutes'] = round((time.time() - start) / 60, 1)
    results['provenance'] = provenance.record(
        ' '.join(['python', 'tools/paper_tables/dense_probes.py',
                  *args.argv]), depends())
    path = osp.join(args.work_dir, 'results.json')
    write_atomically(json.dumps(results, indent=1).encode(), path)
    print(page_table(results, read_suite_table(args.work_dir)))
    print(f'written {path}; store it with --publish {args.work_dir}')


def read_suite_table(run_dir: str) -> str:
    """The suite's ``result.md`` without its title and timing lines: the
    table, its test line and the informativeness lines."""
    with open(osp.join(run_dir, 'suite', 'result.md')) as f:
        lines = f.read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('|'))
    return '\n'.join(lines[start:]).strip() + '\n'


def page_table(results: dict, table: str) -> str:
    """The page's Markdown: the suite's ``table`` and where it was
    measured, from ``results``' provenance."""
    record = results['provenance']
    return (table + f'\n(`{record["command"]}` at commit '
            f'{record["commit"][:10]}, {record["date"]}, {record["machine"]}'
            f': {results["minutes"]:.0f} min wall; seeds {results["seeds"]}; '
            f'result files in `{RESULTS}/`.)\n')


def publish(run_dir: str, results_dir: str = RESULTS) -> str:
    """Store a finished run's ``results.json`` and its table
    (``result.md``) in ``results_dir``; returns the table."""
    with open(osp.join(run_dir, 'results.json')) as f:
        results = json.load(f)
    os.makedirs(results_dir, exist_ok=True)
    table = page_table(results, read_suite_table(run_dir))
    write_atomically(json.dumps(results, indent=1).encode(),
                     osp.join(results_dir, 'results.json'))
    write_atomically(read_suite_table(run_dir).encode(),
                     osp.join(results_dir, 'suite.md'))
    write_atomically(table.encode(), osp.join(results_dir, 'result.md'))
    return table


@cli_main('dense_probes.py')
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--work-dir', default='work_dirs/dense_probes')
    parser.add_argument('--data-root', default='data/mini')
    parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    parser.add_argument('--jobs', type=int, default=2,
                        help='pretraining runs at a time, each '
                        'single-threaded (1: one with all threads)')
    parser.add_argument('--publish', metavar='RUN_DIR',
                        help=f'store a finished run in {RESULTS}/')
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)
    if args.publish:
        print(publish(args.publish))
        return
    if args.jobs < 1:
        parser.error(f'--jobs must be at least 1, got {args.jobs}')
    with work_dir_lock(args.work_dir, keep_output=lambda: True):
        measure(args)
