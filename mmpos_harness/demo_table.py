"""The README's demo table and its confirmation, from committed result files.

``python tools/paper_tables/gen_tables.py --demo work_dirs/demo/<run>``
stores a finished demo's ``results.json`` and its tables
(:func:`~mmpos_harness.comparison.seeds.write`) in :data:`RESULTS` and
rewrites the README's table between its markers from them
(:func:`readme_block`). ``--demo-confirm work_dirs/demo_confirm/<run>``
does the same for the demo run on the fresh seeds of
``designs/demo_confirm.yaml`` (:data:`CONFIRM`, shown on :data:`PAGE`).
``tests/test_results.py`` fails when a page differs from what the stored
files render (with the stale mark where the code the stored run measured
computes something else now).
"""
import json
import os
import os.path as osp
from typing import Optional

from .comparison import seeds

RESULTS = 'results/demo'
THREADS = 'threads.json'  # the thread-count check's results.json
README = 'README.md'
BEGIN, END = '<!-- demo-output:begin -->', '<!-- demo-output:end -->'
# the demo's claim on fresh seeds (issue 55: selection apart from
# confirmation), beside the demo's page
CONFIRM = 'results/demo_confirm'
PAGE = 'docs/get_started/demo.md'
DESIGN = 'designs/demo_confirm.yaml'
CONFIRM_BEGIN = '<!-- demo-confirm:begin -->'
CONFIRM_END = '<!-- demo-confirm:end -->'


def readme_block(results_dir: str = RESULTS, name: str = RESULTS,
                 marks: Optional[dict] = None) -> str:
    """The README's demo table: ``seeds.md`` regenerated from the stored
    ``summary.json`` (:func:`~.comparison.seeds.render`) and where it was
    measured, from ``results.json``'s provenance; under the stale mark
    while ``marks`` (default: ``results/status.json``'s) list the stored
    run (``name``: its folder in the repository)."""
    from .fingerprint import mark, read_marks
    with open(osp.join(results_dir, 'results.json')) as f:
        results = json.load(f)
    record = results['provenance']
    text = seeds.render(seeds.load(osp.join(results_dir, 'summary.json'))) \
        + (f'\n(`{record["command"]}` at commit {record["commit"][:10]}, '
           f'{record["date"]}, {record["machine"]}, {results["jobs"]} '
           f'single-threaded runs at a time: {results["minutes"]:.0f} min '
           f'wall, {results["runs_cpu_minutes"]:.0f} CPU min; result files '
           f'in `{name}/`.)\n')
    threads = osp.join(results_dir, THREADS)
    if osp.isfile(threads):
        with open(threads) as f:
            text += '\n' + thread_sentence(results, json.load(f)) + '\n'
    return mark(name, read_marks() if marks is None else marks) + text


def confirm_block(results_dir: str = CONFIRM,
                  marks: Optional[dict] = None) -> str:
    """The demo page's confirmation: :func:`readme_block` of the run on
    :data:`DESIGN`'s fresh seeds, under the design it tests."""
    return (f'The same comparison on pretraining seeds that chose nothing '
            f'(`{DESIGN}`, committed before these runs; the Holm family is '
            'the two tasks):\n\n' + readme_block(results_dir, CONFIRM, marks))


def _first_run(task: dict, init: str) -> float:
    """The first pretraining seed's first transfer run's value of a task's
    first metric."""
    return task['inits'][init][seeds._first(task)]['groups'][0][0]


def thread_sentence(results: dict, other: dict) -> str:
    """How the first pretraining seed's runs moved when the same commands
    ran with another thread count (``other``: a ``--jobs 1`` demo's
    results, its runs using every core)."""
    cells = []
    for name, task in other['tasks'].items():
        label = task['metrics'][seeds._first(task)]
        for init in task['inits']:
            cells.append(
                f'{init} {task["label"]} {label} '
                f'{_first_run(task, init):.1f} (single-threaded: '
                f'{_first_run(results["tasks"][name], init):.1f})')
    record = other['provenance']
    where = ('the same machine' if record['machine'] ==
             results['provenance']['machine'] else record['machine'])
    return (f'Thread count: `{record["command"]}` (at commit '
            f'{record["commit"][:10]}, {where}) repeats the first '
            'pretraining seed\'s runs one at a time with every core\'s '
            'threads: ' + '; '.join(cells) + '. Float sums in another '
            'order change the runs; the table\'s differences are the ones to '
            'compare, not single values. Across machines: not measured.')


def _replace_block(path: str, begin: str, end: str, block: str) -> None:
    """Rewrite the text of ``path`` between its ``begin`` and ``end`` lines
    with ``block``; the text around them stays."""
    with open(path) as f:
        text = f.read()
    if text.count(begin) != 1 or text.count(end) != 1:
        raise ValueError(f'{path}: needs one {begin} and one {end} line')
    head, rest = text.split(begin)
    _, tail = rest.split(end)
    with open(path, 'w') as f:
        f.write(f'{head}{begin}\n{block}{end}{tail}')


def _store(run_dir: str, results_dir: str) -> None:
    """Copy a finished demo's ``results.json`` and its seed tables into
    ``results_dir``."""
    with open(osp.join(run_dir, 'results.json')) as f:
        results = json.load(f)
    os.makedirs(results_dir, exist_ok=True)
    seeds.write_json(osp.join(results_dir, 'results.json'), results)
    seeds.write(seeds.load(run_dir), results_dir)


def publish(run_dir: str, threads_run: str = None,
            results_dir: str = RESULTS, readme: str = README) -> str:
    """Store a finished demo's ``results.json`` and tables in
    ``results_dir`` (with ``threads_run``, a ``--jobs 1`` demo of the first
    pretraining seed, its ``results.json`` as :data:`THREADS`) and
    regenerate ``readme``'s table from them, between its markers; returns
    the table (unmarked: the run just stored measured the code as it
    is)."""
    _store(run_dir, results_dir)
    if threads_run:
        with open(osp.join(threads_run, 'results.json')) as f:
            seeds.write_json(osp.join(results_dir, THREADS), json.load(f))
    block = readme_block(results_dir, marks={})
    _replace_block(readme, BEGIN, END, block)
    return block


def publish_confirmation(run_dir: str, results_dir: str = CONFIRM,
                         page: str = PAGE) -> str:
    """Store a finished demo run on :data:`DESIGN`'s confirmation seeds in
    ``results_dir`` and regenerate ``page``'s confirmation block from it;
    returns the block (unmarked, as :func:`publish`'s)."""
    _store(run_dir, results_dir)
    block = confirm_block(results_dir, marks={})
    _replace_block(page, CONFIRM_BEGIN, CONFIRM_END, block)
    return block
