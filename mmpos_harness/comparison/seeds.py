"""Seed-repeated comparisons of backbone initialisations (the demo and the
CPU method ranking): mean +- std over seeds per metric, the difference to
random init, and one table ranked by it.

Layout of a comparison directory ``root``::

    <root>/plan.json                         # what ran (see below)
    <root>/pretraining/<init>/               # pretraining work dir
    <root>/<task>/<init>/seed<k>/            # transfer work dirs

(``<init>`` with spaces as underscores, :func:`slug`).
    <work dir>/compute.json                  # {"minutes": wall minutes,
                                             #  "cpu_minutes": CPU minutes}

``plan.json``: ``{"title": str, "seeds": [int], "reference": init,
"inits": [init], "tasks": {task: {"label": str, "metrics": {key: label},
"scale": float}}}``. Metrics are read with
:func:`mmpos_harness.results.read_run` (the final evaluation); runs that
did not finish are counted as missing, never guessed.

A difference is *clear* when it exceeds twice the pooled standard deviation
of the two initialisations, ``2 * sqrt((sd_a**2 + sd_b**2) / 2)`` (sample
std over seeds, ddof = 1); with fewer than two seeds on either side it is
undecided.
"""
import csv
import json
import math
import os.path as osp
from typing import Dict, List, Optional

from ..results import read_run

PLAN = 'plan.json'
COMPUTE = 'compute.json'


def write_json(path: str, obj) -> None:
    with open(path, 'w') as f:
        json.dump(obj, f, indent=2)


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


def transfer_dir(root: str, task: str, init: str, seed: int) -> str:
    return osp.join(root, task, slug(init), f'seed{seed}')


def pretrain_dir(root: str, init: str) -> str:
    return osp.join(root, 'pretraining', slug(init))


def minutes(work_dir: str, key: str = 'minutes') -> Optional[float]:
    """Wall minutes (``key='cpu_minutes'``: CPU minutes) recorded in
    ``work_dir/compute.json``, if any."""
    path = osp.join(work_dir, COMPUTE)
    if not osp.isfile(path):
        return None
    with open(path) as f:
        value = json.load(f).get(key)
    return None if value is None else float(value)


def mean_std(values: List[float]) -> tuple:
    """(mean, sample std (ddof 1, None below 2 values)), None if empty."""
    if not values:
        return None, None
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, None
    var = sum((v - mean)**2 for v in values) / (len(values) - 1)
    return mean, math.sqrt(var)


def summarise(root: str) -> dict:
    """Per task, init and metric: the values over seeds, mean, std, and
    the difference to the reference init with its verdict; per init the
    pretraining and transfer minutes (wall and CPU)."""
    plan = load_plan(root)
    out = dict(title=plan['title'], seeds=plan['seeds'],
               reference=plan['reference'], tasks={}, compute={})
    for init in plan['inits']:
        out['compute'][init] = compute = {}
        for key in ('minutes', 'cpu_minutes'):
            transfer = [
                minutes(transfer_dir(root, task, init, seed), key)
                for task in plan['tasks'] for seed in plan['seeds']
            ]
            compute[f'pretrain_{key}'] = minutes(pretrain_dir(root, init),
                                                 key)
            compute[f'transfer_{key}'] = round(
                sum(m for m in transfer if m), 2)
    for task, spec in plan['tasks'].items():
        scale = spec.get('scale', 1.0)
        per_init = {}
        for init in plan['inits']:
            per_metric = {}
            for key in spec['metrics']:
                values = []
                for seed in plan['seeds']:
                    run = read_run(transfer_dir(root, task, init, seed))
                    if run.status == 'done' and key in run.metrics:
                        values.append(round(run.metrics[key] * scale, 4))
                mean, std = mean_std(values)
                per_metric[key] = dict(values=values, mean=mean, std=std)
            per_init[init] = per_metric
        ref = per_init.get(plan['reference'], {})
        for init, per_metric in per_init.items():
            if init == plan['reference']:
                continue
            for key, stats in per_metric.items():
                stats.update(_difference(stats, ref.get(key)))
        out['tasks'][task] = dict(label=spec['label'],
                                  metrics=spec['metrics'], inits=per_init)
    return out


def _difference(stats: dict, ref: Optional[dict]) -> dict:
    if not ref or stats['mean'] is None or ref['mean'] is None:
        return dict(diff=None, clear=None)
    diff = stats['mean'] - ref['mean']
    if stats['std'] is None or ref['std'] is None:
        return dict(diff=diff, clear=None)
    pooled = math.sqrt((stats['std']**2 + ref['std']**2) / 2)
    return dict(diff=diff, clear=abs(diff) > 2 * pooled, pooled_std=pooled)


def _fmt(mean, std) -> str:
    if mean is None:
        return 'missing'
    return f'{mean:.1f}' if std is None else f'{mean:.1f} ± {std:.1f}'


def _fmt_diff(stats: dict) -> str:
    if stats.get('diff') is None:
        return '-'
    mark = {True: ' (clear)', False: ' (within noise)', None: ''}
    return f'{stats["diff"]:+.1f}{mark[stats["clear"]]}'


def ranking(summary: dict) -> List[str]:
    """Inits by their mean rank over the tasks' first metrics (best
    first; a missing result ranks last)."""
    inits = list(summary['compute'])
    ranks = {init: 0.0 for init in inits}
    for task in summary['tasks'].values():
        key = next(iter(task['metrics']))
        means = {i: task['inits'][i][key]['mean'] for i in inits}
        order = sorted(inits, key=lambda i: -math.inf
                       if means[i] is None else means[i], reverse=True)
        for rank, init in enumerate(order):
            ranks[init] += rank
    return sorted(inits, key=lambda i: (ranks[i], inits.index(i)))


def markdown(summary: dict) -> str:
    """One table: a row per init (ranked), per task its metrics as mean
    ± std (``(n=k)`` where only k of the seeds finished) and the first
    metric's difference to the reference, then the compute."""
    header = ['rank', 'init']
    for task in summary['tasks'].values():
        labels = list(task['metrics'].values())
        header += [f'{task["label"]} {label}' for label in labels]
        header.append(f'{task["label"]} Δ {labels[0]}')
    header += ['pretrain min', 'transfer min']
    lines = [f'**{summary["title"]}** (seeds {summary["seeds"]}; mean ± '
             f'std over seeds; Δ = vs {summary["reference"]}, "clear" when '
             'larger than 2 pooled std)', '',
             '| ' + ' | '.join(header) + ' |',
             '|' + ' --- |' * len(header)]
    for rank, init in enumerate(ranking(summary), 1):
        cells = [str(rank), init]
        for task in summary['tasks'].values():
            per_metric = task['inits'][init]
            cells += [
                _fmt(s['mean'], s['std']) +
                ('' if len(s['values']) == len(summary['seeds']) else
                 f' (n={len(s["values"])})') for s in per_metric.values()
            ]
            cells.append(_fmt_diff(next(iter(per_metric.values()))))
        compute = summary['compute'][init]
        pre = compute['pretrain_minutes']
        cells += ['-' if pre is None else f'{pre:.1f}',
                  f'{compute["transfer_minutes"]:.1f}']
        lines.append('| ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines) + '\n'


def verdicts(summary: dict) -> Dict[str, str]:
    """Per non-reference init, one plain sentence: on which tasks its
    advantage is clear, on which it is not, and which cannot be judged
    (fewer than two seeds on a side)."""
    out = {}
    for init in summary['compute']:
        if init == summary['reference']:
            continue
        clear, unclear, undecided = [], [], []
        for task in summary['tasks'].values():
            stats = task['inits'][init]
            wins = [f'{task["metrics"][k]} {_fmt_diff(s)}'
                    for k, s in stats.items()
                    if s.get('clear') and s['diff'] > 0]
            if wins:
                clear.append(f'{task["label"]} ({", ".join(wins)})')
            elif all(s.get('clear') is None for s in stats.values()):
                undecided.append(task['label'])
            else:
                unclear.append(task['label'])
        parts = []
        if clear:
            parts.append('advantage over {} larger than 2 std on {}'.format(
                summary['reference'], '; '.join(clear)))
        if unclear:
            parts.append('NO advantage over {} beyond 2 std on {} with '
                         'this budget'.format(summary['reference'],
                                              ', '.join(unclear)))
        if undecided:
            parts.append('not judged on {} (fewer than 2 seeds)'.format(
                ', '.join(undecided)))
        out[init] = f'{init}: ' + '; '.join(parts)
    return out


def write(root: str, out_dir: str) -> str:
    """Write ``seeds.md``, ``seeds.csv`` and ``summary.json`` to
    ``out_dir``; returns the markdown."""
    summary = summarise(root)
    text = markdown(summary)
    notes = verdicts(summary)
    text += ''.join(f'\n- {line}' for line in notes.values())
    text += '\n' if notes else ''
    with open(osp.join(out_dir, 'seeds.md'), 'w') as f:
        f.write(text)
    with open(osp.join(out_dir, 'seeds.csv'), 'w', newline='') as f:
        writer = csv.writer(f)
        writer.writerow(['init', 'task', 'metric', 'mean', 'std', 'diff',
                         'clear', 'values'])
        for task, spec in summary['tasks'].items():
            for init, per_metric in spec['inits'].items():
                for key, s in per_metric.items():
                    writer.writerow([init, task, key, s['mean'], s['std'],
                                     s.get('diff'), s.get('clear'),
                                     ' '.join(map(str, s['values']))])
    write_json(osp.join(out_dir, 'summary.json'), summary)
    return text
