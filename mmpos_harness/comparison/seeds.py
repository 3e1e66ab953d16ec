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

Without pretraining seeds (the demo: one pretraining run per init), a
difference is *clear* when it exceeds twice the pooled standard deviation
of the two initialisations, ``2 * sqrt((sd_a**2 + sd_b**2) / 2)`` (sample
std over seeds, ddof = 1); with fewer than two seeds on either side it is
undecided.

With pretraining seeds (``plan.json`` ``"pretrain_seeds": [int]``, the
method ranking) every init is a balanced two-level nested design: ``P``
pretraining seeds (for random init: ``P`` random draws of the backbone),
each transferred with ``T`` transfer seeds, value ``y[p][t]``. Then (one-way
random-effects ANOVA, balanced)::

    m_p   = mean_t y[p][t]                 # per pretraining run
    M     = mean_p m_p                     # the reported mean
    s_b^2 = sum_p (m_p - M)^2 / (P - 1)    # E = s_pre^2 + s_tr^2 / T
    s_w^2 = sum_p sum_t (y[p][t] - m_p)^2 / (P (T - 1))   # E = s_tr^2
    Var(M) = s_b^2 / P                     # = s_pre^2/P + s_tr^2/(P T)

so ``s_b^2 / P`` is the unbiased variance of the mean counting both the
pretraining and the transfer variance (``s_pre^2 = max(0, s_b^2 - s_w^2 /
T)`` is reported beside it). The difference ``D = M_a - M_b`` of two inits
has ``SE = sqrt(s_b,a^2 / P_a + s_b,b^2 / P_b)``, and is *clear* when
``|D| > t_{0.975, nu} * SE`` (two-sided Welch test at 5 %, ``nu`` by
Welch-Satterthwaite with ``P - 1`` degrees of freedom per side). The same
test on the transfer seeds alone (``SE_tr = sqrt(s_w,a^2 / (P_a T_a) +
s_w,b^2 / (P_b T_b))``, ``P (T - 1)`` degrees of freedom a side) is
reported as ``clear_transfer_only``: it ignores that each pretraining run
is itself a draw. Fewer than 2 pretraining seeds on a side: undecided.
A pretraining run whose ``health.json`` (:class:`~mmpos.engine.hooks.
health_monitor.HealthMonitorHook`) numbers say it collapsed flags its init
in the table and the verdicts, with the reasons; it is ranked by its
results like the others (the monitors read raw tokens: a large direction
shared by all tokens, as MAE's, reads as alignment while the probes still
decode the rest).
"""
import csv
import io
import json
import math
import os.path as osp
from typing import Dict, List, Optional

from mmpos.checkpoint import write_atomically
from mmpos.engine.hooks.encoder_tokens import TOKENS_FILE
from mmpos.engine.hooks.health_monitor import HEALTH_FILE
from mmpos.evaluation.health import collapse_reasons

from ..results import read_run

PLAN = 'plan.json'
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


def nested_difference(a: List[List[float]], b: List[List[float]],
                      level: float = 0.975) -> dict:
    """The two-level test of the module docstring: ``a`` and ``b`` are
    ``[[y per transfer seed] per pretraining seed]`` (balanced).

    Returns:
        dict: ``diff`` (``M_a - M_b``), ``se`` and ``df`` (combined),
        ``clear`` (None below 2 pretraining seeds a side),
        ``se_transfer`` / ``clear_transfer_only`` (transfer seeds only,
        None below 2 transfer seeds), ``pretrain_std`` per side
        (``s_pre``).
    """
    from scipy.stats import t as student_t
    sides = [_nested(g) for g in (a, b)]
    out = dict(diff=sides[0]['mean'] - sides[1]['mean'],
               pretrain_std=[s['pretrain_std'] for s in sides])
    for name, var, df in (('', 'var_mean', 'df'),
                          ('_transfer', 'var_mean_transfer', 'df_transfer')):
        key = 'clear' if not name else 'clear_transfer_only'
        if any(s[var] is None for s in sides):
            out.update({f'se{name}': None, f'df{name}': None, key: None})
            continue
        se2 = sides[0][var] + sides[1][var]
        if se2 == 0:  # no spread at all: any difference is clear
            out.update({f'se{name}': 0.0, f'df{name}': math.inf,
                        key: bool(out['diff'] != 0)})
            continue
        nu = se2**2 / sum(s[var]**2 / s[df] for s in sides if s[var])
        out.update({f'se{name}': math.sqrt(se2), f'df{name}': nu,
                    key: bool(abs(out['diff']) > float(
                        student_t.ppf(level, nu)) * math.sqrt(se2))})
    return out


def _nested(groups: List[List[float]]) -> dict:
    """Mean and variances of a balanced nested sample (module docstring)."""
    sizes = {len(g) for g in groups}
    if not groups or len(sizes) != 1 or 0 in sizes:
        raise ValueError(f'nested sample must be balanced and non-empty, '
                         f'got group sizes {[len(g) for g in groups]}')
    P, T = len(groups), sizes.pop()
    means = [sum(g) / T for g in groups]
    M = sum(means) / P
    out = dict(mean=M, var_mean=None, df=P - 1, pretrain_std=None,
               var_mean_transfer=None, df_transfer=P * (T - 1))
    s_w2 = None
    if T > 1:
        s_w2 = sum((y - m)**2 for g, m in zip(groups, means)
                   for y in g) / (P * (T - 1))
        out['var_mean_transfer'] = s_w2 / (P * T)
    if P > 1:
        s_b2 = sum((m - M)**2 for m in means) / (P - 1)
        out['var_mean'] = s_b2 / P
        out['pretrain_std'] = math.sqrt(max(0.0, s_b2 - (s_w2 or 0) / T))
    return out


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
    ``cos_within`` / ``cos_across`` / ``eff_rank`` (and initial
    ``eff_rank0``, ``teacher_entropy`` where logged) over the runs that
    wrote one, ``runs`` / ``collapsed`` counts and the collapse
    ``reasons``; ``unmonitored`` counts the runs whose monitor switched
    itself off (no probe set: not measured, not healthy); None when no
    run wrote one (no monitor, random init).
    The verdict is :func:`~mmpos.evaluation.health.collapse_reasons` on
    the stored numbers, so every table applies the current rule."""
    found, unmonitored = [], 0
    for work_dir in work_dirs:
        path = osp.join(work_dir, HEALTH_FILE)
        if osp.isfile(path):
            with open(path) as f:
                health = json.load(f)
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
        return dict(runs=0, collapsed=0, reasons=[],
                    unmonitored=unmonitored) if unmonitored else None
    out = dict(runs=len(found),
               collapsed=sum(bool(h['reasons']) for h in found),
               reasons=[r for h in found for r in h['reasons']],
               unmonitored=unmonitored)
    for key in ('cos_within', 'cos_across', 'eff_rank', 'teacher_entropy'):
        values = [h['final'][key] for h in found if key in h['final']]
        if values:
            out[key] = sum(values) / len(values)
    out['eff_rank0'] = sum(h['initial']['eff_rank']
                           for h in found) / len(found)
    return out


def summarise(root: str) -> dict:
    """Per task, init and metric: the values over seeds, mean, std, and
    the difference to the reference init with its verdict; per init the
    pretraining and transfer minutes (wall and CPU) and the pretraining
    runs' health (:func:`pretrain_health`)."""
    plan = load_plan(root)
    pseeds = plan.get('pretrain_seeds') or [None]
    pairs = [(p, t) for p in pseeds for t in plan['seeds']]
    out = dict(title=plan['title'], seeds=plan['seeds'],
               pretrain_seeds=plan.get('pretrain_seeds'),
               reference=plan['reference'], budget=plan.get('budget'),
               tasks={}, compute={}, health={})
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
            per_metric = {}
            for key in spec['metrics']:
                groups = []
                for p in pseeds:
                    group = []
                    for seed in seeds:
                        run = read_run(transfer_dir(root, task, init, seed,
                                                    p))
                        if run.status == 'done' and key in run.metrics:
                            group.append(round(run.metrics[key] * scale, 4))
                    groups.append(group)
                values = [v for g in groups for v in g]
                mean, std = mean_std(values)
                per_metric[key] = dict(values=values, mean=mean, std=std,
                                       groups=groups)
            per_init[init] = per_metric
        ref = per_init.get(plan['reference'], {})
        for init, per_metric in per_init.items():
            if init == plan['reference']:
                continue
            for key, stats in per_metric.items():
                stats.update(
                    _difference(stats, ref.get(key)) if pseeds == [None]
                    else _nested_stats(stats, ref.get(key), len(seeds)))
        out['tasks'][task] = dict(label=spec['label'],
                                  metrics=spec['metrics'], inits=per_init,
                                  expected=len(pseeds) * len(seeds))
    return out


def _nested_stats(stats: dict, ref: Optional[dict], num_seeds: int) -> dict:
    """:func:`nested_difference` over the complete pretraining runs (all
    ``num_seeds`` transfer seeds finished) of both sides."""
    if not ref:
        return dict(diff=None, clear=None)
    sides = [[g for g in s['groups'] if len(g) == num_seeds]
             for s in (stats, ref)]
    if not all(sides):
        return dict(diff=None, clear=None)
    return nested_difference(*sides)


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


def orderings(summary: dict, claims: List[tuple]) -> str:
    """A table of claimed orderings ``(better, worse, source)`` checked on
    a nested ``summary``: per task, the difference of the first metric's
    means (``better - worse``) over the complete pretraining runs, with the
    two-level test of :func:`_nested_stats` between the two inits, read as
    "holds" or "reversed" (clear) or "within noise"; ``-`` when a side has
    fewer than 2 pretraining runs."""
    tasks = list(summary['tasks'].values())
    header = ['ordering', 'reported by',
              *[f'{t["label"]} Δ {next(iter(t["metrics"].values()))}'
                for t in tasks]]
    lines = ['| ' + ' | '.join(header) + ' |', '|' + ' --- |' * len(header)]
    num_pretrain = len(summary['pretrain_seeds'])
    for better, worse, source in claims:
        cells = [f'{better} > {worse}', source]
        for task in tasks:
            key = next(iter(task['metrics']))
            test = _nested_stats(task['inits'][better][key],
                                 task['inits'][worse][key],
                                 task['expected'] // num_pretrain)
            if test['clear'] is None:
                cells.append('-')
                continue
            verdict = ('within noise' if not test['clear'] else
                       'holds' if test['diff'] > 0 else 'reversed')
            cells.append(f'{test["diff"]:+.1f} ({verdict})')
        lines.append('| ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines) + '\n'


def collapsed(summary: dict, init: str) -> bool:
    """Whether a pretraining run of ``init`` collapsed (its health)."""
    health = summary.get('health', {}).get(init)
    return bool(health and health['collapsed'])


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


def _fmt_health(health: Optional[dict]) -> List[str]:
    """Health cells: cos within / across, eff. rank (initial), teacher
    entropy, collapsed runs."""
    if not health:
        return ['-'] * 4
    unmonitored = health.get('unmonitored', 0)
    off = f' ({unmonitored} not monitored)' if unmonitored else ''
    if not health['runs']:
        return ['-'] * 3 + [f'not monitored ({unmonitored} runs)']
    entropy = health.get('teacher_entropy')
    return [f'{health["cos_within"]:.2f} / {health["cos_across"]:.2f}',
            f'{health["eff_rank"]:.1f} ({health["eff_rank0"]:.1f})',
            '-' if entropy is None else f'{entropy:.2f}',
            f'{health["collapsed"]}/{health["runs"]}' +
            (' COLLAPSED' if health['collapsed'] else '') + off]


def markdown(summary: dict) -> str:
    """One table: a row per init (ranked; collapsed inits last, rank
    ``-``), per task its metrics as mean ± std (``(n=k)`` where only k of
    the runs finished) and the first metric's difference to the
    reference, then the compute and the pretraining health."""
    nested = bool(summary.get('pretrain_seeds'))
    header = ['rank', 'init']
    for task in summary['tasks'].values():
        labels = list(task['metrics'].values())
        header += [f'{task["label"]} {label}' for label in labels]
        header.append(f'{task["label"]} Δ {labels[0]}')
    header += ['pretrain min', 'tokens / image', 'transfer min',
               'cos within / across',
               'eff. rank (init)', 'teacher entropy', 'collapsed runs']
    if nested:
        seeds = (f'pretraining seeds {summary["pretrain_seeds"]} x transfer '
                 f'seeds {summary["seeds"]}; mean ± std over all runs; Δ = '
                 f'vs {summary["reference"]}, "clear" by a two-sided 5 % '
                 'Welch test on the variance of the mean counting '
                 'pretraining and transfer seeds (seeds.py)')
    else:
        seeds = (f'seeds {summary["seeds"]}; mean ± std over seeds; Δ = vs '
                 f'{summary["reference"]}, "clear" when larger than 2 '
                 'pooled std')
    budget = summary.get('budget')
    lines = [f'**{summary["title"]}** ({seeds})', '']
    if budget:
        lines += [', '.join(f'{k} {v}' for k, v in budget.items()), '']
    lines += ['| ' + ' | '.join(header) + ' |',
              '|' + ' --- |' * len(header)]
    rows = [(str(rank), init) for rank, init in
            enumerate(ranking(summary), 1)]
    for rank, init in rows:
        cells = [rank, init + (' (collapse flagged)'
                               if collapsed(summary, init) else '')]
        for task in summary['tasks'].values():
            per_metric = task['inits'][init]
            expected = task.get('expected', len(summary['seeds']))
            cells += [
                _fmt(s['mean'], s['std']) +
                ('' if len(s['values']) == expected else
                 f' (n={len(s["values"])})') for s in per_metric.values()
            ]
            cells.append(_fmt_diff(next(iter(per_metric.values()))))
        compute = summary['compute'][init]
        pre = compute['pretrain_minutes']
        tokens = compute.get('tokens_per_image')
        cells += ['-' if pre is None else f'{pre:.1f}',
                  '-' if tokens is None else f'{tokens:.0f}',
                  f'{compute["transfer_minutes"]:.1f}']
        cells += _fmt_health(summary.get('health', {}).get(init))
        lines.append('| ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines) + '\n'


def verdicts(summary: dict) -> Dict[str, str]:
    """Per non-reference init, one plain sentence: on which tasks its
    advantage is clear, on which it is not, and which cannot be judged
    (too few seeds), and for a flagged init the collapse reasons."""
    out = {}
    for init in summary['compute']:
        if init == summary['reference']:
            continue
        clear, worse, unclear, undecided = [], [], [], []
        for task in summary['tasks'].values():
            stats = task['inits'][init]
            wins = [f'{task["metrics"][k]} {_fmt_diff(s)}'
                    for k, s in stats.items()
                    if s.get('clear') and s['diff'] > 0]
            losses = [f'{task["metrics"][k]} {_fmt_diff(s)}'
                      for k, s in stats.items()
                      if s.get('clear') and s['diff'] < 0]
            if wins:
                clear.append(f'{task["label"]} ({", ".join(wins)})')
            elif losses:
                worse.append(f'{task["label"]} ({", ".join(losses)})')
            elif all(s.get('clear') is None for s in stats.values()):
                undecided.append(task['label'])
            else:
                unclear.append(task['label'])
        if summary.get('pretrain_seeds'):
            win = lose = 'beyond noise (Welch, pretraining + transfer seeds)'
        else:
            win, lose = 'larger than 2 std', 'beyond 2 std'
        parts = []
        if clear:
            parts.append('advantage over {} {} on {}'.format(
                summary['reference'], win, '; '.join(clear)))
        if worse:
            parts.append('BELOW {} {} on {}'.format(
                summary['reference'], lose, '; '.join(worse)))
        if unclear:
            parts.append('NO advantage over {} {} on {} with this '
                         'budget'.format(summary['reference'], lose,
                                         ', '.join(unclear)))
        if undecided:
            parts.append('not judged on {} (too few seeds)'.format(
                ', '.join(undecided)))
        if collapsed(summary, init):
            health = summary['health'][init]
            parts.append(f'COLLAPSE FLAGGED on {health["collapsed"]} of '
                         f'{health["runs"]} pretraining runs (' + '; '.join(
                             sorted(set(health['reasons']))) + ')')
        out[init] = f'{init}: ' + '; '.join(parts)
    return out


def write(root: str, out_dir: str) -> str:
    """Write ``seeds.md``, ``seeds.csv`` and ``summary.json`` to
    ``out_dir`` (each atomically; the same runs give the same bytes);
    returns the markdown."""
    summary = summarise(root)
    text = markdown(summary)
    notes = verdicts(summary)
    text += ''.join(f'\n- {line}' for line in notes.values())
    text += '\n' if notes else ''
    write_atomically(text.encode(), osp.join(out_dir, 'seeds.md'))
    table = io.StringIO()
    writer = csv.writer(table)
    writer.writerow(['init', 'task', 'metric', 'mean', 'std', 'diff',
                     'clear', 'values'])
    for task, spec in summary['tasks'].items():
        for init, per_metric in spec['inits'].items():
            for key, s in per_metric.items():
                writer.writerow([init, task, key, s['mean'], s['std'],
                                 s.get('diff'), s.get('clear'),
                                 ' '.join(map(str, s['values']))])
    write_atomically(table.getvalue().encode(),
                     osp.join(out_dir, 'seeds.csv'))
    write_json(osp.join(out_dir, 'summary.json'), summary)
    return text
