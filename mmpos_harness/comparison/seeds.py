"""Seed-repeated comparisons of backbone initialisations (the demo and the
CPU method ranking): per metric the values over seeds and their mean ± std,
each task's first metric tested against the reference init
(:mod:`mmpos_stats`), one table ranked with rank intervals.

Layout of a comparison directory ``root``::

    <root>/plan.json                         # what ran (see below)
    <root>/pretraining/<init>/               # pretraining work dir
    <root>/<task>/<init>/seed<k>/            # transfer work dirs

(``<init>`` with spaces as underscores, :func:`slug`).
    <work dir>/compute.json                  # {"minutes": wall minutes,
                                             #  "cpu_minutes": CPU minutes}

``plan.json``: ``{"title": str, "seeds": [int], "reference": init,
"inits": [init], "tasks": {task: {"label": str, "metrics": {key: label},
"scale": float}}}``, optionally ``"pretrain_seeds": [int]``, ``"budget"``,
``"orderings": [[better, worse, source]]`` (claimed orderings, checked
in ``orderings.md``, :func:`orderings`) and ``"baselines": {name: {task:
[seed]}}``: rows of what does not pretrain (:data:`IMAGE_FREE`, never
looking at the image; the raw pixels), run in
``<root>/<task>/<name>/seed<k>/`` with the given seeds. Metrics are read with
:func:`mmpos_harness.results.read_run` (the final evaluation); runs that
did not finish are ``None`` in the summary's ``groups``, never guessed.

Designs and tests (the rules are :mod:`mmpos_stats`'):

* With pretraining seeds (the method ranking) every init is a two-level
  design: ``P`` pretraining runs (for random init: ``P`` random draws of
  the backbone), each transferred with ``T`` seeds, ``groups[p][t]``. The
  test is Welch's t on the per-pretraining-run means
  (:func:`~mmpos_stats.welch`) over the complete runs (every
  transfer seed finished), which counts the pretraining and the transfer
  variance; its interval is the test's t interval.
* Without (the demo: one pretraining run per init, ``groups`` ``[[y per
  seed]]``) the inits share the transfer seeds (both run each seed with
  the same ``randomness.seed``: the same order of batches), so the test
  is the paired t over the seeds both finished
  (:func:`~mmpos_stats.paired`). It measures the transfer
  variance only: one pretraining run cannot show its own.

A table is one family: the first metric of every task for every
non-reference init (its Δ columns), adjusted by Holm; the other metrics
are shown as mean ± std, not tested; the minimum detectable differences
under it are at the family's level (``0.05 / m``). The ranking
(:func:`~mmpos_stats.t_rank_intervals`) is over the tasks' first
metrics, on the tasks where every init has at least 2 runs; under the
table the aggregates over those tasks (Agarwal et al. 2021: IQM, the
probability of improvement over the reference, the fraction of runs
above it, with stratified bootstrap intervals; :func:`_aggregates`).

Baselines are shown beside the inits, never ranked or tested against
the reference. A task with an :data:`IMAGE_FREE` baseline is informative
when the best init other than the reference (by the first metric's mean)
is above it: the one-sample t of that init's per-run values (per
pretraining run means with pretraining seeds) against the baseline's
value, Holm over the tasks (the family of the informativeness tests); the
ranking leaves out the tasks that are not.

A pretraining run whose ``health.json`` (:class:`~mmpos.engine.hooks.
health_monitor.HealthMonitorHook`, centred statistics) numbers say it
collapsed flags its init in the table and the verdicts, with the reasons;
it is ranked by its results like the others. A summary written before the
statistics were centred keeps its numbers but is not judged by the
current rule ("not judged" in the table, never flagged).
"""
import csv
import dataclasses
import io
import json
import os.path as osp
import statistics
from typing import Dict, List, Optional

import mmpos_stats as stats
from mmpos.checkpoint import write_atomically
from mmpos.engine.hooks.encoder_tokens import TOKENS_FILE
from mmpos.engine.hooks.health_monitor import HEALTH_FILE, read_health
from mmpos.evaluation.health import collapse_reasons

from ..results import read_run

PLAN = 'plan.json'
#: the baseline row that never looks at the image (a probe's prior)
IMAGE_FREE = 'image-free'
COMPUTE = 'compute.json'


def write_json(path: str, obj, indent: int = 2) -> None:
    """``obj`` as indented JSON at ``path``, written atomically
    (:func:`~mmpos.checkpoint.write_atomically`: a kill leaves the old file
    or none, never a partial one)."""
    write_atomically(json.dumps(obj, indent=indent).encode(), path)


def load_plan(root: str) -> dict:
    path = osp.join(root, PLAN)
    if not osp.isfile(path):
        raise ValueError(f'{path}: no plan.json (not a seed comparison)')
    with open(path) as f:
        plan = json.load(f)
    missing = {'title', 'seeds', 'reference', 'inits', 'tasks'} - set(plan)
    if missing:
        raise ValueError(f'{path}: missing keys {sorted(missing)}')
    return plan


def slug(init: str) -> str:
    """Directory name of an init (``'random init'`` -> ``random_init``)."""
    return init.replace(' ', '_')


def transfer_dir(root: str, task: str, init: str, seed: int,
                 pretrain_seed: Optional[int] = None) -> str:
    """``<root>/<task>/<init>/seed<k>``, with a pretraining seed
    ``<root>/<task>/<init>/pseed<p>/seed<k>``."""
    parts = [] if pretrain_seed is None else [f'pseed{pretrain_seed}']
    return osp.join(root, task, slug(init), *parts, f'seed{seed}')


def pretrain_dir(root: str, init: str,
                 pretrain_seed: Optional[int] = None) -> str:
    """``<root>/pretraining/<init>`` (``/pseed<p>`` with a pretraining
    seed)."""
    parts = [] if pretrain_seed is None else [f'pseed{pretrain_seed}']
    return osp.join(root, 'pretraining', slug(init), *parts)



def minutes(work_dir: str, key: str = 'minutes') -> Optional[float]:
    """Wall minutes (``key='cpu_minutes'``: CPU minutes) recorded in
    ``work_dir/compute.json``, if any."""
    path = osp.join(work_dir, COMPUTE)
    if not osp.isfile(path):
        return None
    with open(path) as f:
        value = json.load(f).get(key)
    return None if value is None else float(value)



def tokens_per_image(work_dirs: List[str]) -> Optional[float]:
    """Mean encoder tokens per image over the pretraining runs that wrote
    ``encoder_tokens.json`` (:class:`~mmpos.engine.hooks.encoder_tokens.
    EncoderTokensHook`); None when none did."""
    values = []
    for work_dir in work_dirs:
        path = osp.join(work_dir, TOKENS_FILE)
        if osp.isfile(path):
            with open(path) as f:
                values.append(json.load(f)['tokens_per_image'])
    return sum(values) / len(values) if values else None


def pretrain_health(work_dirs: List[str]) -> Optional[dict]:
    """The pretraining runs' ``health.json`` summarised: mean final
    ``spread`` / ``eff_rank`` / ``cos_within`` / ``cos_across`` (initial
    ``spread0`` / ``eff_rank0``; ``teacher_entropy`` where logged) over the
    runs that wrote one, ``runs`` / ``collapsed`` counts and the collapse
    ``reasons``; ``unmonitored`` counts the runs whose monitor switched
    itself off (no probe set: not measured, not healthy); None when no
    run wrote one (no monitor, random init).
    The verdict is :func:`~mmpos.evaluation.health.collapse_reasons` on
    the stored numbers, so every table applies the current rule."""
    found, unmonitored = [], 0
    for work_dir in work_dirs:
        path = osp.join(work_dir, HEALTH_FILE)
        if osp.isfile(path):
            health = read_health(path)  # refuses un-centred files
            if health.get('disabled'):  # the monitor had no probe set
                unmonitored += 1
                continue
            entropy = health['final'].get('teacher_entropy')
            if entropy is not None and not health.get('num_prototypes'):
                raise ValueError(f'{path}: teacher_entropy without '
                                 'num_prototypes, the verdict needs K')
            health['reasons'] = collapse_reasons(
                health['final'], health['initial'], entropy,
                health.get('num_prototypes'))
            found.append(health)
    if not found:
        return dict(centred=True, runs=0, collapsed=0, reasons=[],
                    unmonitored=unmonitored) if unmonitored else None
    out = dict(centred=True, runs=len(found),
               collapsed=sum(bool(h['reasons']) for h in found),
               reasons=[r for h in found for r in h['reasons']],
               unmonitored=unmonitored)
    for key in ('spread', 'eff_rank', 'cos_within', 'cos_across',
                'teacher_entropy'):
        values = [h['final'][key] for h in found if key in h['final']]
        if values:
            out[key] = sum(values) / len(values)
    for key in ('spread', 'eff_rank'):
        out[f'{key}0'] = sum(h['initial'][key] for h in found) / len(found)
    return out



def summarise(root: str) -> dict:
    """The comparison in ``root`` (its plan and finished runs): per task,
    init and metric the values per pretraining and transfer seed
    (``groups``, None where a run did not finish), per init the
    pretraining and transfer minutes (wall and CPU) and the pretraining
    runs' health (:func:`pretrain_health`); the statistics by
    :func:`analyse`."""
    plan = load_plan(root)
    pseeds = plan.get('pretrain_seeds') or [None]
    pairs = [(p, t) for p in pseeds for t in plan['seeds']]
    out = dict(title=plan['title'], seeds=plan['seeds'],
               pretrain_seeds=plan.get('pretrain_seeds'),
               reference=plan['reference'], budget=plan.get('budget'),
               orderings=plan.get('orderings'), tasks={}, compute={},
               health={})
    for init in plan['inits']:
        out['compute'][init] = compute = {}
        pre_dirs = [pretrain_dir(root, init, p) for p in pseeds]
        for key in ('minutes', 'cpu_minutes'):
            transfer = [minutes(transfer_dir(root, task, init, t, p), key)
                        for task in plan['tasks'] for p, t in pairs]
            pre = [m for m in (minutes(d, key) for d in pre_dirs) if m]
            compute[f'pretrain_{key}'] = round(sum(pre), 2) if pre else None
            compute[f'transfer_{key}'] = round(
                sum(m for m in transfer if m), 2)
        compute['tokens_per_image'] = tokens_per_image(pre_dirs)
        out['health'][init] = pretrain_health(pre_dirs)
    for task, spec in plan['tasks'].items():
        scale = spec.get('scale', 1.0)
        seeds = spec.get('seeds', plan['seeds'])  # kNN: deterministic, one
        per_init = {}
        for init in plan['inits']:
            per_init[init] = _groups(
                [[read_run(transfer_dir(root, task, init, s, p))
                  for s in seeds] for p in pseeds], spec['metrics'], scale)
        out['tasks'][task] = dict(label=spec['label'],
                                  metrics=spec['metrics'], inits=per_init)
        rows = {name: tasks[task] for name, tasks in
                (plan.get('baselines') or {}).items() if task in tasks}
        if rows:
            out['tasks'][task]['baselines'] = {name: _groups(
                [[read_run(transfer_dir(root, task, name, s))
                  for s in row_seeds]], spec['metrics'], scale)
                for name, row_seeds in rows.items()}
    return analyse(out)


def _groups(grid: List[list], keys, scale: float) -> dict:
    """``{key: {'groups': [[value per run] per group]}}`` of the finished
    runs of ``grid`` (:func:`~mmpos_harness.results.read_run` results),
    scaled and rounded; None where a run did not finish or lacks the
    key."""
    return {key: dict(groups=[[
        round(run.metrics[key] * scale, 4)
        if run.status == 'done' and key in run.metrics else None
        for run in row] for row in grid]) for key in keys}


def load(path: str) -> dict:
    """A comparison's summary: from a comparison directory (``plan.json``
    and its runs, :func:`summarise`) or a stored ``summary.json``,
    re-analysed from its raw values (:func:`analyse`)."""
    if osp.isdir(path):
        return summarise(path)
    with open(path) as f:
        summary = json.load(f)
    if not isinstance(summary, dict) or 'tasks' not in summary:
        raise ValueError(f'{path}: not a comparison summary (no "tasks")')
    return analyse(summary)


def _first(task: dict) -> str:
    """The metric a task is tested and ranked by."""
    return next(iter(task['metrics']))


def _num_seeds(task: dict) -> int:
    """Transfer seeds per pretraining run of a task."""
    return max(len(g) for per_metric in task['inits'].values()
               for s in per_metric.values() for g in s['groups'])


def _sample(summary: dict, task: dict, init: str, key: str) -> list:
    """An init's sample for :mod:`mmpos_stats`: with pretraining
    seeds its complete pretraining runs, otherwise one run per finished
    seed."""
    groups = task['inits'][init][key]['groups']
    if summary.get('pretrain_seeds'):
        return [g for g in groups
                if len(g) == _num_seeds(task) and None not in g]
    return [v for v in groups[0] if v is not None]


def _compare(summary: dict, task: dict, key: str, a: str,
             b: str) -> Optional[stats.Comparison]:
    """``a`` against ``b`` on one task's metric by the design's test
    (module docstring); None when a side has no result."""
    if summary.get('pretrain_seeds'):
        samples = [_sample(summary, task, i, key) for i in (a, b)]
        return stats.welch(*samples) if all(samples) else None
    pairs = [(x, y) for x, y in zip(task['inits'][a][key]['groups'][0],
                                    task['inits'][b][key]['groups'][0])
             if x is not None and y is not None]
    return stats.paired(*zip(*pairs)) if pairs else None


def analyse(summary: dict) -> dict:
    """(Re)compute every statistic of ``summary`` from its raw ``groups``
    (anything else a metric holds is replaced): per metric (of the inits
    and the baselines) ``values``,
    ``mean``, ``std``; per non-reference init and task the first metric's
    ``test`` (:meth:`~mmpos_stats.Comparison.asdict`, adjusted
    by Holm over the table); ``expected`` runs per task; ``ranks`` (rank
    and its 95 % interval per init, None without a task where every init
    has 2 runs), ``ranked_on`` (those tasks' labels) and ``aggregates``
    (:func:`_aggregates`). Returns ``summary``."""
    ref = summary['reference']
    inits = list(summary['compute'])
    cells = []
    for task in summary['tasks'].values():
        for per_metric in [*task['inits'].values(),
                           *task.get('baselines', {}).values()]:
            for key, raw in per_metric.items():
                values = [v for g in raw['groups'] for v in g if v is not None]
                mean, std = stats.mean_std(values)
                per_metric[key] = dict(values=values, groups=raw['groups'],
                                       mean=mean, std=std)
        any_init = next(iter(task['inits'].values()))
        task['expected'] = len(next(iter(any_init.values()))['groups']) * \
            _num_seeds(task)
        key = _first(task)
        for init in inits:
            test = None if init == ref else _compare(summary, task, key,
                                                     init, ref)
            if test is not None:
                cells.append((task['inits'][init][key], test))
    for (cell, _), test in zip(cells, stats.family([c for _, c in cells],
                                                   stats.HOLM)):
        cell['test'] = test.asdict()
    _informative(summary)
    ranked = [t for t in summary['tasks'].values()
              if all(len(_sample(summary, t, i, _first(t))) >= 2
                     for i in inits)
              and t.get('informative', {}).get('informative', True)]
    summary['ranked_on'] = [t['label'] for t in ranked]
    summary['ranks'] = {
        init: dataclasses.asdict(r) for init, r in stats.t_rank_intervals({
            i: [_sample(summary, t, i, _first(t)) for t in ranked]
            for i in inits}).items()} if ranked else None
    summary['aggregates'] = _aggregates(summary, ranked)
    return summary


def _run_means(summary: dict, task: dict, init: str) -> List[float]:
    """An init's value per run of a task's first metric (the mean over
    a pretraining run's transfer seeds)."""
    return [statistics.mean(g) if isinstance(g, list) else g
            for g in _sample(summary, task, init, _first(task))]


def _aggregates(summary: dict, ranked: List[dict]) -> Optional[dict]:
    """Over the ranked tasks, per init (Agarwal et al. 2021,
    :mod:`mmpos_stats`): ``iqm`` of its runs' scores normalised
    by the reference's mean on each task (1 = the reference), ``improvement``
    the probability that a run of it is above a run of the reference on a
    task, ``above`` the fraction of its normalised run scores above 1
    (the performance profile at tau 1), each ``[value, low, high]`` with
    its 95 % stratified bootstrap interval. None when no task is ranked or
    the inits' runs differ in number between tasks (no score matrix)."""
    ref = summary['reference']
    if not ranked:
        return None
    scores = {}
    for init in summary['compute']:
        runs = [_run_means(summary, t, init) for t in ranked]
        if len({len(r) for r in runs}) != 1:
            return None
        scores[init] = [list(row) for row in zip(*runs)]  # (runs, tasks)
    norm = [statistics.mean(v[k] for v in scores[ref])
            for k in range(len(ranked))]
    out = {}
    for init, matrix in scores.items():
        normed = [[v / n for v, n in zip(row, norm)] for row in matrix]
        entry = {}
        for name, value, args, extra in (
                ('iqm', stats.iqm(normed), [normed], {}),
                ('improvement', stats.probability_of_improvement(
                    matrix, scores[ref]), [matrix, scores[ref]], {}),
                ('above', stats.performance_profile(normed, [1.0])[0],
                 [normed], {'tau': 1.0})):
            interval = stats.stratified_interval(
                'profile' if name == 'above' else name, *args, **extra)
            entry[name] = [value, interval.low, interval.high]
        out[init] = entry
    return out


def _informative(summary: dict) -> None:
    """Per task with an :data:`IMAGE_FREE` baseline its ``informative``:
    ``best`` (the init other than the reference with the highest mean of
    the first metric), ``test`` (its per-run values against the baseline's
    value, one-sample t, Holm over the tasks) and ``informative`` (above
    with a verdict)."""
    found = []
    for task in summary['tasks'].values():
        key = _first(task)
        prior = task.get('baselines', {}).get(IMAGE_FREE, {}).get(key)
        means = {i: m[key]['mean'] for i, m in task['inits'].items()
                 if i != summary['reference'] and m[key]['mean'] is not None}
        if not prior or prior['mean'] is None or not means:
            continue
        best = max(means, key=means.get)
        sample = _run_means(summary, task, best)
        found.append((task, best, stats.paired(
            sample, [prior['mean']] * len(sample))))
    tests = stats.family([t for _, _, t in found], stats.HOLM)
    for (task, best, _), test in zip(found, tests):
        task['informative'] = dict(best=best, test=test.asdict(),
                                   informative=test.verdict == 'higher')


def _test(cell: dict) -> Optional[stats.Comparison]:
    return stats.Comparison.from_dict(cell['test']) if 'test' in cell \
        else None


def _columns(summary: dict) -> Dict[str, List[stats.Comparison]]:
    """The table's tests by Δ column (task label and metric label)."""
    out = {}
    for task in summary['tasks'].values():
        key = _first(task)
        tests = [_test(per_metric[key]) for per_metric in
                 task['inits'].values()]
        out[f'{task["label"]} {task["metrics"][key]}'] = [
            t for t in tests if t is not None]
    return out


def _design(summary: dict) -> str:
    """What the table's test is, in a sentence."""
    if summary.get('pretrain_seeds'):
        return ("Test: Welch's t on the per-pretraining-run means (each the "
                'mean over its transfer seeds; complete runs only), which '
                'counts the pretraining and the transfer variance.')
    return ('Test: paired t over the transfer seeds both inits finished '
            '(both run each seed with the same randomness.seed: the same '
            'order of batches). One pretraining run per init: the test '
            'measures the transfer variance only, not the pretraining '
            'run\'s own.')


def _cell(cell: dict) -> str:
    test = _test(cell)
    return 'missing' if test is None else stats.format_cell(test)


def orderings(summary: dict, claims: List[tuple]) -> str:
    """A table of claimed orderings ``(better, worse, source)`` checked on
    ``summary``: per task, the first metric's difference ``better - worse``
    by the design's test (:func:`analyse`), adjusted by Holm over the
    table's distinct tests (a claim and its mirror are one test), read as
    "holds" or "reversed" when the adjusted p is below 0.05."""
    tasks = list(summary['tasks'].values())
    header = ['ordering', 'reported by',
              *[f'{t["label"]} Δ {t["metrics"][_first(t)]}' for t in tasks]]
    index, tests = {}, []
    for better, worse, _ in claims:
        pair = tuple(sorted((better, worse)))
        for k, task in enumerate(tasks):
            if (pair, k) not in index:
                index[pair, k] = len(tests)
                tests.append(_compare(summary, task, _first(task), *pair))
    judged = iter(stats.family([t for t in tests if t is not None],
                               stats.HOLM))
    tests = [None if t is None else next(judged) for t in tests]
    lines = ['| ' + ' | '.join(header) + ' |', '|' + ' --- |' * len(header)]
    for better, worse, source in claims:
        pair = tuple(sorted((better, worse)))
        cells = [f'{better} > {worse}', source]
        for k in range(len(tasks)):
            test = tests[index[pair, k]]
            if test is None:
                cells.append('missing')
                continue
            if pair != (better, worse):
                test = test.swapped()
            cells.append(stats.format_cell(test) + {
                'higher': ', holds', 'lower': ', reversed'}.get(
                    test.verdict, ''))
        lines.append('| ' + ' | '.join(cells) + ' |')
    columns = {f'{t["label"]} {t["metrics"][_first(t)]}': [
        tests[i] for (_, k), i in index.items() if k == j and tests[i]]
        for j, t in enumerate(tasks)}
    if any(columns.values()):
        lines += ['', _design(summary) + ' ' + stats.describe(
            columns, adjusted=True) +
                  ' A claim and its mirror are one test; "holds" / '
                  '"reversed": the claimed sign / the opposite one with '
                  'p_adj < 0.05.']
    return '\n'.join(lines) + '\n'


def collapsed(summary: dict, init: str) -> bool:
    """Whether a pretraining run of ``init`` collapsed by the current
    (centred) rule."""
    health = summary.get('health', {}).get(init)
    return bool(health and health.get('centred') and health['collapsed'])



def ranking(summary: dict) -> List[str]:
    """Inits by their rank (:func:`analyse`; best first, ties in the
    plan's order); in the plan's order when nothing could be ranked."""
    inits = list(summary['compute'])
    ranks = summary.get('ranks')
    if not ranks:
        return inits
    return sorted(inits, key=lambda i: (ranks[i]['rank'], inits.index(i)))


def _fmt_health(health: Optional[dict]) -> List[str]:
    """Health cells: spread (initial), eff. rank (initial), teacher
    entropy, collapsed runs."""
    if not health:
        return ['-'] * 4
    if not health.get('centred'):
        return ['-'] * 3 + ['not judged (un-centred statistics of the old '
                            'monitor)']
    unmonitored = health.get('unmonitored', 0)
    off = f' ({unmonitored} not monitored)' if unmonitored else ''
    if not health['runs']:
        return ['-'] * 3 + [f'not monitored ({unmonitored} runs)']
    entropy = health.get('teacher_entropy')
    return [f'{health["spread"]:.2f} ({health["spread0"]:.2f})',
            f'{health["eff_rank"]:.1f} ({health["eff_rank0"]:.1f})',
            '-' if entropy is None else f'{entropy:.2f}',
            f'{health["collapsed"]}/{health["runs"]}' +
            (' COLLAPSED' if health['collapsed'] else '') + off]



def markdown(summary: dict) -> str:
    """One table: a row per init (ranked, with the rank's 95 % interval),
    per task its metrics as mean ± std (``(n=k)`` where only k of the runs
    finished) and the first metric's difference to the reference
    (:func:`~mmpos_stats.format_cell`), then the compute and
    the pretraining health; under it the test, the family and the
    minimum detectable differences."""
    header = ['rank [95 % interval]', 'init']
    for task in summary['tasks'].values():
        labels = list(task['metrics'].values())
        header += [f'{task["label"]} {label}' for label in labels]
        header.append(f'{task["label"]} Δ {labels[0]}')
    header += ['pretrain min', 'tokens / image', 'transfer min',
               'spread (init)', 'eff. rank (init)', 'teacher entropy',
               'collapsed runs']
    if summary.get('pretrain_seeds'):
        seeds = (f'pretraining seeds {summary["pretrain_seeds"]} x transfer '
                 f'seeds {summary["seeds"]}; mean ± std over all runs')
    else:
        seeds = f'seeds {summary["seeds"]}; mean ± std over seeds'
    ranked_on = summary.get('ranked_on') or []
    if len(ranked_on) < len(summary['tasks']):
        ranked_on_text = ('ranked on ' + ', '.join(ranked_on) if ranked_on
                          else 'not ranked: no task has every init')
    else:
        ranked_on_text = 'rank by the mean rank over the tasks\' first ' \
            'metrics, with its 95 % interval (t draws of the run means)'
    budget = summary.get('budget')
    lines = [f'**{summary["title"]}** ({seeds}; Δ = vs '
             f'{summary["reference"]}; {ranked_on_text})', '']
    if budget:
        lines += [', '.join(f'{k} {v}' for k, v in budget.items()), '']
    lines += ['| ' + ' | '.join(header) + ' |',
              '|' + ' --- |' * len(header)]
    ranks = summary.get('ranks') or {}
    for init in ranking(summary):
        r = ranks.get(init)
        cells = ['-' if r is None else
                 f'{r["rank"]:g} [{r["low"]:g}, {r["high"]:g}]',
                 init + (' (collapse flagged)'
                         if collapsed(summary, init) else '')]
        for task in summary['tasks'].values():
            per_metric = task['inits'][init]
            cells += [
                stats.format_mean_std(s['mean'], s['std']) +
                ('' if len(s['values']) == task['expected'] else
                 f' (n={len(s["values"])})') for s in per_metric.values()
            ]
            first = per_metric[_first(task)]
            cells.append('-' if init == summary['reference'] else
                         _cell(first))
        compute = summary['compute'][init]
        pre = compute['pretrain_minutes']
        tokens = compute.get('tokens_per_image')
        cells += ['-' if pre is None else f'{pre:.1f}',
                  '-' if tokens is None else f'{tokens:.0f}',
                  f'{compute["transfer_minutes"]:.1f}']
        cells += _fmt_health(summary.get('health', {}).get(init))
        lines.append('| ' + ' | '.join(cells) + ' |')
    names = list(dict.fromkeys(name for task in summary['tasks'].values()
                               for name in task.get('baselines', {})))
    for name in names:
        cells = ['-', f'{name} (baseline, not ranked)']
        for task in summary['tasks'].values():
            row = task.get('baselines', {}).get(name)
            cells += ['-' if row is None else stats.format_mean_std(
                s['mean'], s['std']) for s in (
                    row or dict.fromkeys(task['metrics'])).values()]
            cells.append('-')
        lines.append('| ' + ' | '.join(cells + ['-'] * 7) + ' |')
    columns = _columns(summary)
    if any(columns.values()):
        lines += ['', _design(summary) + ' ' + stats.describe(
            columns, adjusted=True)]
    lines += _informative_lines(summary) + _aggregate_lines(summary)
    return '\n'.join(lines) + '\n'


def _aggregate_lines(summary: dict) -> List[str]:
    """Under the table: the aggregates over the ranked tasks
    (:func:`_aggregates`), a row per init in the ranking's order."""
    found = summary.get('aggregates')
    if not found:
        return []
    ref = summary['reference']
    fmt = lambda v: f'{v[0]:.2f} [{v[1]:.2f}, {v[2]:.2f}]'  # noqa: E731
    lines = ['', f'Aggregates over the ranked tasks (Agarwal et al. 2021; '
             f'scores / {ref}\'s mean per task; 95 % stratified bootstrap '
             'intervals; descriptive, they undercover):', '',
             f'| init | IQM | P(run > {ref} run) | runs > {ref} mean |',
             '| --- | --- | --- | --- |']
    for init in ranking(summary):
        entry = found[init]
        lines.append(f'| {init} | {fmt(entry["iqm"])} | '
                     f'{fmt(entry["improvement"])} | '
                     f'{fmt(entry["above"])} |')
    return lines


def _informative_lines(summary: dict) -> List[str]:
    """Under the table: per task with an image-free baseline whether it is
    informative (:func:`_informative`)."""
    lines = []
    for task in summary['tasks'].values():
        found = task.get('informative')
        if not found:
            continue
        key = _first(task)
        test = stats.Comparison.from_dict(found['test'])
        what = (f'informative: {found["best"]} is above the {IMAGE_FREE} '
                'baseline' if found['informative'] else
                f'NOT INFORMATIVE: no init is above the {IMAGE_FREE} '
                'baseline with a verdict; not ranked, its differences are '
                'not a ranking')
        lines.append(f'- {task["label"]}: {what} ({task["metrics"][key]}, '
                     f'{found["best"]} − {IMAGE_FREE} '
                     f'{stats.format_cell(test)}).')
    if lines:
        lines = ['', 'Is each probe informative? (the best init other than '
                 f'the reference against the {IMAGE_FREE} baseline, '
                 'one-sample t on its per-run values, Holm over the '
                 'probes)'] + lines
    return lines


def verdicts(summary: dict) -> Dict[str, str]:
    """Per non-reference init, one plain sentence: the tasks where its
    first metric is above or below the reference (adjusted p < 0.05),
    those without a verdict or without a test, and for a flagged init the
    collapse reasons."""
    out = {}
    ref = summary['reference']
    for init in summary['compute']:
        if init == ref:
            continue
        found = {'higher': [], 'lower': [], 'no verdict': [], 'no test': [],
                 'missing': []}
        for task in summary['tasks'].values():
            key = _first(task)
            test = _test(task['inits'][init][key])
            if test is None:
                found['missing'].append(task['label'])
            elif test.verdict in ('higher', 'lower'):
                found[test.verdict].append(
                    f'{task["label"]} ({task["metrics"][key]} '
                    f'{stats.format_cell(test)})')
            else:
                found[test.verdict].append(task['label'])
        parts = []
        for word, what in (('higher', f'above {ref} on'),
                           ('lower', f'BELOW {ref} on'),
                           ('no verdict', f'no verdict against {ref} on'),
                           ('no test', 'no test (too few runs) on'),
                           ('missing', 'no results on')):
            if found[word]:
                sep = '; ' if word in ('higher', 'lower') else ', '
                parts.append(f'{what} {sep.join(found[word])}')
        if collapsed(summary, init):
            health = summary['health'][init]
            parts.append(f'COLLAPSE FLAGGED on {health["collapsed"]} of '
                         f'{health["runs"]} pretraining runs (' + '; '.join(
                             sorted(set(health['reasons']))) + ')')
        out[init] = f'{init}: ' + '; '.join(parts)
    return out


def render(summary: dict) -> str:
    """``seeds.md``: the table (:func:`markdown`) and a line per verdict
    (:func:`verdicts`)."""
    notes = verdicts(summary)
    return markdown(summary) + ''.join(
        f'\n- {line}' for line in notes.values()) + ('\n' if notes else '')


def write(summary: dict, out_dir: str) -> str:
    """Write ``seeds.md``, ``seeds.csv``, ``summary.json`` and, when the
    summary carries claimed orderings, ``orderings.md`` to ``out_dir``
    (each atomically; the same runs give the same bytes); returns the
    markdown."""
    text = render(summary)
    write_atomically(text.encode(), osp.join(out_dir, 'seeds.md'))
    table = io.StringIO()
    writer = csv.writer(table)
    writer.writerow(['init', 'task', 'metric', 'mean', 'std', 'diff', 'low',
                     'high', 'p', 'p_adj', 'verdict', 'values'])
    for task, spec in summary['tasks'].items():
        for init, per_metric in spec['inits'].items():
            for key, s in per_metric.items():
                test = s.get('test', {})
                writer.writerow([init, task, key, s['mean'], s['std'],
                                 test.get('difference'), test.get('low'),
                                 test.get('high'), test.get('pvalue'),
                                 test.get('p_adj'), test.get('verdict'),
                                 ' '.join(map(str, s['values']))])
    write_atomically(table.getvalue().encode(),
                     osp.join(out_dir, 'seeds.csv'))
    write_json(osp.join(out_dir, 'summary.json'), summary)
    if summary.get('orderings'):
        claims = orderings(summary, summary['orderings'])
        write_atomically(claims.encode(), osp.join(out_dir, 'orderings.md'))
        text += '\n' + claims
    return text
