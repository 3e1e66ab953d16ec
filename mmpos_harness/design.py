"""Study designs: what a study will run and how it will be judged, fixed in
a file committed before its runs (issue 55: selection apart from
confirmation).

Every design lives in ``designs/<study>.yaml`` (one place). :func:`load`
reads one and refuses a bad one in one line naming the file and key;
:func:`check` recomputes from the stored runs what the file claims (the
per-run SD, the runs its power calculation asks for, the CPU hours of the
plan) and refuses a design whose confirmation seeds overlap the seeds that
selected it or whose plan exceeds its budget; :func:`command` is the
runner's command line for the design (the runner reads its arms, seeds and
tasks from it).

A design file (YAML)::

    study: method_ranking_confirm          # the file's name without .yaml
    status: planned                        # planned | running | done
    question: one sentence
    runner: tools/paper_tables/method_ranking.py   # or null: not runnable yet
    options: {images: 32000}               # the runner's other options
    arms: [droppos, ..., random]           # the runner's names
    reference: random
    seeds:
      selection: {tuning: [0, 1], ...}     # seeds that chose anything
      confirmation: [100, 101, ...]        # fresh pretraining seeds
      transfer: [0, 1, 2]
    tasks: [linear-probe, ...]
    families:                              # one adjustment per family
      headline: {correction: holm, tests: [[droppos, linear-probe], ...]}
    alpha: 0.05
    power:
      target: 0.8
      sd_from: results/method_ranking/summary.json   # stored per-run values
      deltas: {linear-probe: 2.0}          # difference to detect per task
    margins: {linear-probe: 1.0}           # TOST equivalence margins
    budget:
      cpu_hours: 15
      cost_from: results/method_ranking/summary.json # stored timings
    notes: free text (what is left out and why)

``families`` lists each family's tests as ``[arm, task]`` pairs (each
against ``reference``; ``[arm, task, other]`` against another arm or a
baseline, ``pixels`` or ``image-free``) and their ``kind``:
``difference`` (Welch, two-sided, the default), ``equivalence`` (TOST
within the task's ``margins``, :func:`~mmpos_stats.tost`) or
``above_margin`` (the difference's interval at the family's level lies
above the task's margin).

:func:`judge` reads a runner's summary (a comparison ``summary.json``,
:mod:`~.comparison.seeds`) and gives every family's verdicts as the file
says: each test on the per-run values of the task's first metric (the
ranking's own Welch test; against a baseline row of one value the
one-sample t), p adjusted within the family, a verdict per test
(:class:`Judged`). A position study's directory (its per-seed run files,
:func:`read_study`) is judged the same way, each test the paired t over
the seeds both arms ran (:func:`_study_comparison`)::

    python tools/misc/judge_design.py designs/probes.yaml SUMMARY_JSON
    python tools/misc/judge_design.py designs/resolution_study.yaml STUDY_DIR
"""
import dataclasses
import glob
import json
import math
import os
import os.path as osp
import re
import statistics
from typing import Dict, List, Optional

import yaml

import mmpos_stats as stats
from mmpos.errors import BadInputError

from .comparison import seeds
from .provenance import ROOT

DESIGNS = 'designs'
KEYS = {'study', 'status', 'question', 'runner', 'options', 'arms',
        'reference', 'seeds', 'tasks', 'families', 'alpha', 'power',
        'margins', 'budget', 'notes', 'exploratory'}
REQUIRED = KEYS - {'options', 'margins', 'notes', 'exploratory'}
SEED_KEYS = {'selection', 'confirmation', 'transfer'}
FAMILY_KEYS = {'correction', 'tests', 'kind'}
POWER_KEYS = {'target', 'sd_from', 'deltas', 'effects'}
EFFECT_KEYS = {'test', 'delta', 'sd_cell', 'source', 'powered'}
BUDGET_KEYS = {'cpu_hours', 'cost_from', 'estimate'}
EXPLORATORY_KEYS = {'arms', 'seeds'}
# the resolution study: its runs' cost from the stored study's CPU seconds
# per FLOP (mmpos_harness.position_study.cpu_seconds_per_flop)
POSITION_STUDY = 'tools/paper_tables/position_study.py'
STATUSES = ('planned', 'running', 'done')
# budget.estimate: None (the stored runs' cost as it is), 'flops' (the
# position study's cost model) or 'calibration' (stored runs pretrained on
# fewer images than options.images, their pretraining minutes scaled up)
ESTIMATES = (None, 'flops', 'calibration')
KINDS = ('difference', 'equivalence', 'above_margin')
# the study runners: whether each takes the arms and tasks (the demo's
# are fixed: DropPos and random init, detection and segmentation)
RUNNERS = {'tools/paper_tables/method_ranking.py': True, 'tools/demo.py': False,
           'tools/paper_tables/position_study.py': False,
           'tools/paper_tables/distill_study.py': True}
# the runners' names of the arms -> the names in their summaries
ARM_NAMES = {'droppos': 'DropPos', 'cr2pq': 'CR2PQ', 'dinov2': 'DINOv2',
             'icpf': 'ICPF', 'mae': 'MAE', 'random': 'random init',
             'pixels': 'raw pixels', 'image-free': 'image-free'}


def _keys(path: str, where: str, found: dict, allowed: set,
          required: set) -> None:
    if not isinstance(found, dict):
        raise BadInputError(f'{path}: {where} must be a mapping, got '
                            f'{found!r}')
    unknown = sorted(set(found) - allowed)
    if unknown:
        raise BadInputError(f'{path}: unknown key {where}{unknown[0]!r}; '
                            f'allowed: {sorted(allowed)}')
    missing = sorted(required - set(found))
    if missing:
        raise BadInputError(f'{path}: missing key {where}{missing[0]!r}')


def _seed_list(path: str, where: str, value) -> List[int]:
    if not isinstance(value, list) or not value or not all(
            isinstance(s, int) and not isinstance(s, bool) for s in value):
        raise BadInputError(f'{path}: {where} must be a non-empty list of '
                            f'integer seeds, got {value!r}')
    return value


def load(path: str) -> dict:
    """The design in ``path``, its keys and values checked (one
    :class:`~mmpos.errors.BadInputError` line naming the file and the
    key); the file's name must be its ``study``."""
    if not osp.isfile(path):
        raise FileNotFoundError(f'design not found: {path}')
    with open(path) as f:
        design = yaml.safe_load(f)
    _keys(path, '', design, KEYS, REQUIRED)
    name = osp.splitext(osp.basename(path))[0]
    if design['study'] != name:
        raise BadInputError(f'{path}: study is {design["study"]!r}, the '
                            f'file is named {name!r}')
    if design['status'] not in STATUSES:
        raise BadInputError(f'{path}: status must be one of {STATUSES}, '
                            f'got {design["status"]!r}')
    if design['runner'] is not None and design['runner'] not in RUNNERS:
        raise BadInputError(f'{path}: runner {design["runner"]!r} is not a '
                            f'study runner; runners: {sorted(RUNNERS)}')
    for key in ('arms', 'tasks'):
        if not isinstance(design[key], list) or not design[key]:
            raise BadInputError(f'{path}: {key} must be a non-empty list')
    if design['reference'] not in design['arms']:
        raise BadInputError(f'{path}: reference {design["reference"]!r} is '
                            'not one of the arms')
    seeds = design['seeds']
    _keys(path, 'seeds.', seeds, SEED_KEYS, SEED_KEYS - {'transfer'})
    if not isinstance(seeds['selection'], dict):
        raise BadInputError(f'{path}: seeds.selection must map what chose '
                            'something to its seeds')
    for what, value in seeds['selection'].items():
        _seed_list(path, f'seeds.selection.{what}', value)
    for key in sorted(set(seeds) - {'selection'}):
        _seed_list(path, f'seeds.{key}', seeds[key])
    alpha = design['alpha']
    if not isinstance(alpha, float) or not 0 < alpha < 1:
        raise BadInputError(f'{path}: alpha must be a number in (0, 1), '
                            f'got {alpha!r}')
    _families(path, design)
    _keys(path, 'power.', design['power'], POWER_KEYS,
          POWER_KEYS - {'effects' if 'deltas' in design['power'] else
                        'deltas'})
    _effects(path, design)
    _exploratory(path, design)
    _keys(path, 'budget.', design['budget'], BUDGET_KEYS,
          BUDGET_KEYS - {'estimate'})
    if design['budget'].get('estimate') not in ESTIMATES:
        raise BadInputError(f'{path}: budget.estimate must be one of '
                            f'{ESTIMATES[1:]} (the position study\'s cost '
                            'model, a calibration at fewer images), got '
                            f'{design["budget"]["estimate"]!r}')
    for where, mapping in (('power.deltas',
                            design['power'].get('deltas') or {}),
                           ('margins', design.get('margins') or {})):
        for task, value in mapping.items():
            if task not in design['tasks']:
                raise BadInputError(f'{path}: {where}.{task}: not one of '
                                    'the tasks')
            if not isinstance(value, (int, float)) or value <= 0:
                raise BadInputError(f'{path}: {where}.{task} must be a '
                                    f'positive number, got {value!r}')
    return design


def _exploratory(path: str, design: dict) -> None:
    """``exploratory``: arms run with fewer seeds, a subset of the
    confirmation seeds (so that they pair with the reference's runs)."""
    found = design.get('exploratory')
    if found is None:
        return
    _keys(path, 'exploratory.', found, EXPLORATORY_KEYS, EXPLORATORY_KEYS)
    seeds = _seed_list(path, 'exploratory.seeds', found['seeds'])
    extra = sorted(set(seeds) - set(design['seeds']['confirmation']))
    if extra:
        raise BadInputError(f'{path}: exploratory.seeds {extra} are not '
                            'confirmation seeds (no reference run to pair '
                            'with)')
    both = sorted(set(found['arms']) & set(design['arms']))
    if not isinstance(found['arms'], list) or not found['arms'] or both:
        raise BadInputError(f'{path}: exploratory.arms must be a non-empty '
                            f'list apart from arms, got {found["arms"]!r}')


def _effects(path: str, design: dict) -> None:
    """``power.effects``: the papers' effects, each a family's test, the
    difference it claims, the stored paired cell whose SD stands in
    (``[table, row, column, reference row]``) and whether the seeds must
    detect it (``powered``)."""
    tests = [t for fam in design['families'].values() for t in fam['tests']]
    for k, effect in enumerate(design['power'].get('effects') or []):
        where = f'power.effects[{k}].'
        _keys(path, where, effect, EFFECT_KEYS, EFFECT_KEYS)
        if effect['test'] not in tests:
            raise BadInputError(f'{path}: {where}test {effect["test"]!r} is '
                                'not a test of the families')
        delta = effect['delta']
        if not isinstance(delta, (int, float)) or delta <= 0:
            raise BadInputError(f'{path}: {where}delta must be a positive '
                                f'number, got {delta!r}')
        cell = effect['sd_cell']
        if not (isinstance(cell, list) and len(cell) == 4):
            raise BadInputError(f'{path}: {where}sd_cell must be [table, '
                                f'row, column, reference row], got {cell!r}')


def _families(path: str, design: dict) -> None:
    if not isinstance(design['families'], dict) or not design['families']:
        raise BadInputError(f'{path}: families must map a name to its tests')
    for name, fam in design['families'].items():
        where = f'families.{name}.'
        _keys(path, where, fam, FAMILY_KEYS, {'correction', 'tests'})
        if fam['correction'] not in stats.CORRECTIONS:
            raise BadInputError(f'{path}: {where}correction must be one of '
                                f'{list(stats.CORRECTIONS)}, got '
                                f'{fam["correction"]!r}')
        kind = fam.get('kind', 'difference')
        if kind not in KINDS:
            raise BadInputError(f'{path}: {where}kind must be one of '
                                f'{KINDS}, got {kind!r}')
        for test in fam['tests']:
            if not isinstance(test, list) or len(test) not in (2, 3) or \
                    test[1] not in design['tasks'] or any(
                        arm not in design['arms'] + ['pixels', 'image-free'] +
                        (design.get('exploratory') or {}).get('arms', [])
                        for arm in test[:1] + test[2:]):
                raise BadInputError(f'{path}: {where}tests: {test!r} is not '
                                    '[arm, task] or [arm, task, other arm] '
                                    'of the design\'s arms and tasks')
            if kind != 'difference' and test[1] not in (
                    design.get('margins') or {}):
                raise BadInputError(f'{path}: {where}tests: {test!r} is '
                                    f'an {kind} test without margins.'
                                    f'{test[1]}')


# ------------------------------------------------- from the stored runs
def _summary(path: str) -> dict:
    with open(osp.join(ROOT, path)) as f:
        return json.load(f)


def run_sd(summary_path: str, task: str) -> tuple:
    """The per-run SD of ``task``'s first metric in a stored comparison
    summary: the per-pretraining-run means (each the mean over its
    transfer seeds; complete runs only) pooled within the inits
    (:func:`~mmpos_stats.pooled_sd`). Returns ``(sd, df)``."""
    spec = _summary(summary_path)['tasks'][task]
    key = next(iter(spec['metrics']))
    groups = []
    for per_metric in spec['inits'].values():
        groups.append([statistics.mean(g) for g in per_metric[key]['groups']
                       if g and None not in g])
    return stats.pooled_sd(groups)


def paired_sd(summary_path: str, cell: list) -> tuple:
    """The SD of the per-seed differences ``row - reference`` in column
    ``column`` of table ``table`` of a stored position study
    (``cell = [table, row, column, reference]``; the same seeds in the
    same order in both rows). Returns ``(sd, df)``."""
    table, row, column, reference = cell
    rows = _summary(summary_path)['tables'][table]['rows']
    diffs = [a - b for a, b in zip(rows[row][column]['values'],
                                   rows[reference][column]['values'])]
    return statistics.stdev(diffs), len(diffs) - 1


def paired_power(sd: float, delta: float, n: int, alpha: float) -> float:
    """Power of a two-sided paired t test over ``n`` pairs (SD of a pair's
    difference ``sd``) at level ``alpha`` against a true ``delta``: the
    noncentral t's mass beyond the critical values."""
    from scipy.stats import nct
    from scipy.stats import t as student_t
    crit = float(student_t.ppf(1 - alpha / 2, n - 1))
    shift = delta / (sd / math.sqrt(n))
    return float(nct.sf(crit, n - 1, shift) + nct.cdf(-crit, n - 1, shift))


def paired_runs(sd: float, delta: float, alpha: float,
                power: float) -> int:
    """The fewest pairs (at least 2) whose paired t test detects ``delta``
    with ``power`` at level ``alpha`` (:func:`paired_power`)."""
    return next(n for n in range(2, 10000)
                if paired_power(sd, delta, n, alpha) >= power)


def _level(design: dict, test: list) -> float:
    """``alpha / m`` of the largest family holding ``test``."""
    return design['alpha'] / max(len(fam['tests'])
                                 for fam in design['families'].values()
                                 if test in fam['tests'])


def effects(design: dict) -> List[dict]:
    """Per ``power.effects`` entry: its ``test``, ``delta``, the stored
    paired ``sd`` (:func:`paired_sd`), the family ``level``, the pairs
    ``needed`` for ``power.target`` and the ``power`` with the
    confirmation seeds."""
    out = []
    n = len(design['seeds']['confirmation'])
    for effect in design['power'].get('effects') or []:
        sd, _ = paired_sd(design['power']['sd_from'], effect['sd_cell'])
        level = _level(design, effect['test'])
        out.append(dict(
            test=effect['test'], delta=effect['delta'], sd=sd, level=level,
            powered=effect['powered'],
            needed=paired_runs(sd, effect['delta'], level,
                               design['power']['target']),
            power=paired_power(sd, effect['delta'], n, level)))
    return out


def family_sizes(design: dict) -> Dict[str, int]:
    """Tests per family."""
    return {name: len(fam['tests'])
            for name, fam in design['families'].items()}


def runs_needed(design: dict) -> Dict[str, int]:
    """Per task with a ``power.deltas`` entry, the pretraining runs per arm
    that detect that difference with ``power.target`` power at the level
    of the largest family testing the task (``alpha / m``, Holm's and
    BH's level for a lone effect, :func:`~mmpos_stats.
    family_alpha`), with the stored per-run SD (:func:`run_sd`)."""
    power = design['power']
    out = {'/'.join(e['test']): e['needed'] for e in effects(design)
           if e['powered']}
    for task, delta in (power.get('deltas') or {}).items():
        sizes = [len(fam['tests']) for fam in design['families'].values()
                 if any(t[1] == task for t in fam['tests'])]
        alpha = design['alpha'] / max(sizes or [1])
        sd, _ = run_sd(power['sd_from'], task)
        out[task] = stats.runs_for_difference(sd, float(delta), alpha,
                                              power['target'])
    return out


def _stored_cpu_minutes(path: str) -> float:
    """CPU minutes of one stored run file (its ``compute.json``)."""
    with open(path) as f:
        files = json.load(f)['files']
    return float(json.loads(files['compute.json'])['cpu_minutes'])


def cost_per_run(design: dict) -> Dict[str, float]:
    """CPU minutes of one pretraining run of each arm with its transfer
    runs (``len(seeds.transfer)`` per task), measured on the stored runs
    of ``budget.cost_from``: a folder of stored run files (the ranking's
    layout, ``pretraining/<init>/pseed<p>.json`` and ``<task>/<init>/
    pseed<p>/seed<k>.json``, each with its ``compute.json``: the mean per
    pretraining run and per transfer run of each task the design runs;
    with ``budget.estimate: calibration`` the pretraining minutes scaled
    by :func:`calibration_scale`) or
    a comparison summary (its ``compute`` sums over its pretraining seeds
    and every stored task, scaled to the design's transfer seeds)."""
    source = osp.join(ROOT, design['budget']['cost_from'])
    transfer = len(design['seeds'].get('transfer') or [])
    out = {}
    if design['budget'].get('estimate') == 'flops':
        return _flops_cost(design, source)
    scale = calibration_scale(design, source) if design['budget'].get(
        'estimate') == 'calibration' else 1.0
    if osp.isfile(source):
        summary = _summary(source)
        runs = len(summary.get('pretrain_seeds') or [None])
        for arm in design['arms']:
            compute = summary['compute'][ARM_NAMES.get(arm, arm)]
            out[arm] = ((compute['pretrain_cpu_minutes'] or 0.0) +
                        compute['transfer_cpu_minutes'] * transfer /
                        len(summary['seeds'])) / runs
        return out
    for arm in design['arms']:
        slug = ARM_NAMES.get(arm, arm).replace(' ', '_')
        pre = glob.glob(osp.join(source, 'pretraining', slug, '*.json'))
        minutes = scale * statistics.mean(map(_stored_cpu_minutes, pre)) \
            if pre else 0.0
        for task in design['tasks']:
            found = glob.glob(osp.join(source, task, slug, '**', '*.json'),
                              recursive=True)
            if not found:
                raise BadInputError(f'{source}: no stored runs of {task} / '
                                    f'{slug} to measure the cost from')
            minutes += transfer * statistics.mean(
                map(_stored_cpu_minutes, found))
        out[arm] = minutes
    return out


def calibration_scale(design: dict, source: str) -> float:
    """``budget.estimate: calibration``: ``options.images`` over the
    images of the calibration archived in ``source`` (its ``plan.json``'s
    ``budget.images``, :mod:`~.comparison.archive`), the factor on its
    pretraining runs' CPU minutes (every step of a pretraining run is
    counted as scaling with its images, its start-up and hooks too, so
    the estimate errs high). The transfer runs are the design's own."""
    with open(osp.join(source, 'plan.json')) as f:
        images = json.load(f)['plan']['budget']['images']
    return (design.get('options') or {})['images'] / images


def _flops_cost(design: dict, source: str) -> Dict[str, float]:
    """The position study's cost (``budget.estimate: flops``), per trained
    arm (an arm or exploratory arm without `` +``, the test-time scalings
    riding on its runs) in minutes: the mean ``cpu_seconds`` of its runs
    stored in ``source`` at the design's ``options`` (a calibration), else
    an estimate: ``source``'s CPU seconds per FLOP, over its runs of
    schemes without an attention bias, times the FLOPs of one run with the
    design's ``options`` (:func:`mmpos_harness.position_study.run_flops`).
    The FLOPs count no bias: a scheme that adds one (PaPE, LookHere:
    :func:`mmpos_positions.adds_bias`) is priced low unless measured."""
    from mmpos_positions import SCHEMES, adds_bias

    from . import position_study as study
    opt = design['options']
    table = study.all_schemes(opt['train-size'] // study.PATCH)
    measured = {}
    for arm, runs in read_study(source)['runs'].items():
        runs = [r for r in runs.values() if all(
            r.get(k.replace('-', '_')) == v for k, v in opt.items()
            if k in ('iters', 'batch-size', 'num-train', 'num-val',
                     'train-size', 'sizes', 'embed-dims', 'num-heads'))]
        if runs:
            measured[arm] = statistics.mean(r['cpu_seconds'] for r in runs)

    def bias(arm):
        rope = table[arm].get('rope')
        return rope is not None and adds_bias(SCHEMES[rope['type']](
            head_dim=16, num_heads=2, depth=1))
    rate = study.cpu_seconds_per_flop(source, skip={
        _folder(a) for a in table if bias(a)})
    arch = dict(embed_dims=opt['embed-dims'],
                feedforward_channels=4 * opt['embed-dims'])
    out = {}
    for arm in design['arms'] + design['exploratory']['arms']:
        if ' +' in arm:
            continue
        if _folder(arm) in measured:
            out[arm] = measured[_folder(arm)] / 60
            continue
        variants = 1 + (len(opt['scalings'])
                        if study.scalable(table[arm]) else 0)
        out[arm] = rate * study.run_flops(
            opt['train-size'], opt['sizes'], opt['iters'],
            opt['batch-size'], opt['num-val'], len(opt['factors']),
            variants, **arch) / 60
    return out


def planned_cpu_hours(design: dict) -> float:
    """CPU hours of the design's runs: every arm with every confirmation
    seed, every exploratory arm with its seeds, at the per-run cost
    (:func:`cost_per_run`)."""
    cost = cost_per_run(design)
    exploratory = design.get('exploratory') or dict(arms=[], seeds=[])
    return sum(minutes * len(exploratory['seeds']
                             if arm in exploratory['arms'] else
                             design['seeds']['confirmation'])
               for arm, minutes in cost.items()) / 60


def check(design: dict, path: str = 'design') -> dict:
    """Recompute what the design rests on and refuse it (one
    :class:`~mmpos.errors.BadInputError` line) when its confirmation seeds
    overlap a selection seed, are fewer than its power calculation asks
    for (:func:`runs_needed`) or its plan exceeds its budget. Returns
    ``{'runs_needed', 'runs_planned', 'cpu_hours', 'sd'}``."""
    seeds = design['seeds']
    used = {s for v in seeds['selection'].values() for s in v}
    overlap = sorted(used & set(seeds['confirmation']))
    if overlap:
        raise BadInputError(f'{path}: seeds.confirmation {overlap} were used '
                            'to select (seeds.selection); confirmation '
                            'needs fresh seeds')
    needed = runs_needed(design)
    short = {t: n for t, n in needed.items()
             if n > len(seeds['confirmation'])}
    if short:
        task = next(iter(short))
        where = 'effects ' if '/' in task else 'deltas.'
        raise BadInputError(f'{path}: power.{where}{task} needs '
                            f'{short[task]} runs per arm, seeds.confirmation '
                            f'has {len(seeds["confirmation"])}')
    hours = planned_cpu_hours(design)
    if hours > design['budget']['cpu_hours']:
        raise BadInputError(f'{path}: the plan needs {hours:.1f} CPU hours, '
                            f'budget.cpu_hours is '
                            f'{design["budget"]["cpu_hours"]}')
    sd = {'/'.join(e['test']): e['sd'] for e in effects(design)}
    sd.update({t: run_sd(design['power']['sd_from'], t)[0]
               for t in design['power'].get('deltas') or {}})
    return dict(runs_needed=needed,
                runs_planned=len(seeds['confirmation']),
                cpu_hours=hours, sd=sd)


def _options(design: dict) -> list:
    parts = []
    for key, value in (design.get('options') or {}).items():
        parts += [f'--{key}', *map(str, value if isinstance(value, list)
                                   else [value])]
    return parts


def _study_command(design: dict, exploratory: bool) -> str:
    """The position study's command: into ``work_dirs/<study>`` (its
    rendered images' cache, about 1 GB, stays out of git; each finished
    ``runs/<scheme>/seed<k>.json`` is copied to ``results/<study>/runs``
    and committed), the trained
    arms (an arm with `` +`` is a test-time scaling of its scheme's runs,
    ``options.scalings``) with the confirmation seeds, or the reference
    and the exploratory arms with theirs (``--summary exploratory``)."""
    if exploratory:
        arms = [design['reference'], *design['exploratory']['arms']]
        seeds = design['exploratory']['seeds']
    else:
        arms = [a for a in design['arms'] if ' +' not in a]
        seeds = design['seeds']['confirmation']
    parts = ['python', design['runner'], f'work_dirs/{design["study"]}',
             '--schemes', *arms, '--seeds', *map(str, seeds),
             *_options(design)]
    return ' '.join(parts + (['--summary', 'exploratory'] if exploratory
                             else []))


def command(design: dict, exploratory: bool = False) -> str:
    """The runner's command line for the design: its confirmation seeds
    (``--pretrain-seeds``), transfer seeds (``--seeds``), where the runner
    takes them (:data:`RUNNERS`) its arms (``--methods``) and tasks
    (``--tasks``), and ``options``; for the position study
    :func:`_study_command` (``exploratory``: the exploratory arms')."""
    if design['runner'] is None:
        raise BadInputError(f'design {design["study"]}: no runner (not '
                            'runnable yet; see its notes)')
    if design['runner'] == POSITION_STUDY:
        return _study_command(design, exploratory)
    parts = ['python', design['runner']]
    if RUNNERS[design['runner']]:  # the runner takes the arms and tasks
        parts += ['--methods', *design['arms'], '--tasks', *design['tasks']]
    parts += ['--pretrain-seeds', *map(str, design['seeds']['confirmation']),
              '--seeds', *map(str, design['seeds']['transfer'])]
    return ' '.join(parts + _options(design))


def designs(root: str = ROOT) -> List[str]:
    """The design files of the repository, sorted."""
    folder = osp.join(root, DESIGNS)
    return sorted(osp.join(folder, f) for f in os.listdir(folder)
                  if f.endswith('.yaml')) if osp.isdir(folder) else []


def mdd_planned(design: dict, task: str) -> float:
    """The minimum detectable difference of a ``task`` cell with the
    planned runs per arm, at the level of its largest family (as
    :func:`runs_needed`)."""
    sizes = [len(fam['tests']) for fam in design['families'].values()
             if any(t[1] == task for t in fam['tests'])]
    n = len(design['seeds']['confirmation'])
    sd, _ = run_sd(design['power']['sd_from'], task)
    return stats.minimum_detectable_difference(
        sd * math.sqrt(2 / n), 2 * n - 2,
        design['alpha'] / max(sizes or [1]), design['power']['target'])


# --------------------------------------------- judging a runner's summary
#: the rows of a comparison summary that do not pretrain (``baselines``)
BASELINES = ('pixels', 'image-free')
#: a position study's test of a change against 0 (the reference's own
#: change; a model's shuffled top-1 against its intact top-1)
ZERO = '0'
#: the key of :func:`read_study`'s mapping that holds the study's folder
STUDY = 'position_study'
#: the word of a verdict per family kind (beside ``no verdict`` and
#: ``no test``); difference: the comparison's ``higher`` / ``lower``
ABOVE = 'above margin'


@dataclasses.dataclass(frozen=True)
class Judged:
    """One test of a design's family judged on a runner's summary
    (:func:`judge`).

    Attributes:
        family, kind: the family's name and kind.
        arm, task, other: the test, ``arm - other`` on ``task``'s first
            metric (``other``: the reference, another arm, ``pixels`` or
            ``image-free``; the design's names; a position study's
            :data:`ZERO`, :func:`_study_comparison`).
        method: ``'welch'`` (independent runs), ``'paired'`` (one
            pretraining run per arm, shared transfer seeds; a position
            study's seeds) or ``'one-sample t'`` (against a baseline of one
            value).
        difference: ``D``, the arm's mean minus the other's; None when a
            side has no complete run.
        n_a, n_b: runs of each side (a one-value baseline: 1; paired:
            the pairs).
        low, high: the interval of ``D`` at ``confidence``: difference the
            test's 95 % t interval, equivalence TOST's 90 % interval,
            above margin ``D -+ t_{1 - a, nu} SE`` at the level ``a`` the
            family's correction applies to the test (:func:`judge`), the
            confidence ``1 - 2a``; None without a test.
        confidence: of ``[low, high]``; None without a test.
        pvalue, p_adj: the test's p (above margin: one-sided, ``H0: delta
            <= margin``) and p adjusted within the family; None without a
            test.
        margin: the task's margin (equivalence, above margin), else None.
        verdict: ``'higher'`` / ``'lower'`` (difference), ``'equivalent'``
            (equivalence), ``'above margin'``, or ``'no verdict'`` /
            ``'no test'`` (fewer than 2 runs on a side).
        reason: why there is no test, else None.
        se: the standard error of ``D`` (paired: the SD of the per-seed
            differences over the square root of the pairs); None without
            a test.
        mdd: a difference family's minimum detectable difference at 80 %
            power and the level its correction applies
            (:func:`~mmpos_stats.family_mdd`), so that no verdict is not
            read as no difference; None in the other kinds or without a
            test.
    """
    family: str
    kind: str
    arm: str
    task: str
    other: str
    method: str
    difference: Optional[float]
    n_a: int
    n_b: int
    low: Optional[float]
    high: Optional[float]
    confidence: Optional[float]
    pvalue: Optional[float]
    p_adj: Optional[float]
    margin: Optional[float]
    verdict: str
    reason: Optional[str]
    se: Optional[float] = None
    mdd: Optional[float] = None


def read_summary(path: str) -> dict:
    """A runner's ``summary.json`` (a comparison summary,
    :mod:`~.comparison.seeds`: per task its ``metrics`` and per init and
    baseline row the raw ``groups``), read as stored (nothing
    re-analysed), or a position study's directory (:func:`read_study`);
    anything else is refused in one line naming the file."""
    if osp.isdir(path):
        return read_study(path)
    with open(path) as f:
        summary = json.load(f)
    if not isinstance(summary, dict) or not isinstance(
            summary.get('tasks'), dict):
        raise BadInputError(f'{path}: not a comparison summary (no "tasks" '
                            'mapping)')
    return summary


def _folder(scheme: str) -> str:
    """The folder of ``scheme``'s run files in a position study's
    ``runs/`` (:func:`mmpos_harness.position_study.run_folder`)."""
    from .position_study import run_folder
    return run_folder(scheme)


def read_study(path: str) -> dict:
    """A position study's directory (:mod:`~.position_study`): its run
    files ``runs/<scheme>/seed<k>.json`` read as stored, ``{STUDY: path,
    'runs': {folder: {k: run}}}`` (:func:`_folder`); a directory without
    one is refused in one line naming it."""
    found: Dict[str, dict] = {}
    for file in sorted(glob.glob(osp.join(path, 'runs', '*', 'seed*.json'))):
        seed = osp.basename(file)[len('seed'):-len('.json')]
        if not seed.isdigit():
            raise BadInputError(f'{file}: not a run file seed<k>.json')
        with open(file) as f:
            found.setdefault(osp.basename(osp.dirname(file)),
                             {})[int(seed)] = json.load(f)
    if not found:
        raise BadInputError(f'{path}: not a position study (no '
                            'runs/<scheme>/seed<k>.json) nor a summary')
    return {STUDY: path, 'runs': found}


def _other(design: dict, test: list, summary: dict) -> str:
    """The other side of ``test``: its third entry, else the reference;
    in a position study :data:`ZERO` for the reference's own change and
    for a model's shuffled top-1 (against its intact top-1), as the
    study's own tables test them."""
    if len(test) == 3:
        return test[2]
    if STUDY in summary and (test[1] == 'shuffled' or (
            test[0] == design['reference'] and test[1].endswith('-change'))):
        return ZERO
    return design['reference']


def _study_values(runs: dict, task: str, arm: str, path: str,
                  where: str):
    """``arm``'s per-seed values of ``task`` in the position study's
    ``runs`` (``{scheme: {seed: run}}``, the same seeds in the same
    order), read by the study's own tables (:func:`~.position_study.
    factor_table`, :func:`~.position_study.shuffle_table`):
    ``<factor>-change`` top-1 at the largest size minus top-1 at the
    training size (a scaled arm ``<scheme> +PI``: its scaled top-1 minus
    the scheme's own at the training size), ``<factor>-<k>x`` top-1 at
    ``k`` times the training side, ``shuffled`` the shuffled top-1 minus
    the intact one, both at the training size. Returns the values, or
    why there are none (a factor or scaling the runs did not store); a
    task of no such form, or a size not stored, is refused in one line."""
    from . import position_study as study
    scheme, _, scaling = arm.partition(' +')
    own = {scheme: runs[scheme]}
    first = next(iter(own[scheme].values()))
    train = int(next(iter(first['shuffled'])))
    if task == 'shuffled':
        if scaling:
            return f'no shuffled top-1 of a scaled arm ({arm})'
        row = study.shuffle_table(own, train)['rows'][scheme]
        return [s - i for s, i in zip(row['shuffled']['values'],
                                      row['intact']['values'])]
    factor, _, column = task.rpartition('-')
    form = re.fullmatch(r'change|(\d+(?:\.\d+)?)x', column)
    if factor not in study.ALL_FACTORS or not form:
        raise BadInputError(f'{path}: task {task!r} is not <factor>-change, '
                            f'<factor>-<k>x (factor one of '
                            f'{list(study.ALL_FACTORS)}) or shuffled '
                            f'({where})')
    key = factor + (f'_{scaling.lower()}' if scaling else '')
    lacking = [k for k, run in own[scheme].items()
               if factor not in run or key not in run]
    if lacking:
        return f'no {key!r} in the run of {scheme}, seed {lacking[0]}'
    sizes = sorted(int(size) for size in first[factor] if int(size) != train)
    if form.group(1):
        scale = float(form.group(1))
        if scale * train not in sizes:
            raise BadInputError(f'{path}: task {task!r}: the runs store '
                                f'{factor} at {sizes} px, training size '
                                f'{train} ({where})')
        column = str(int(scale * train))
    rows = study.factor_table(own, factor, train, sizes)['rows']
    return rows[arm][column]['values']


def _study_comparison(study: dict, path: str, where: str, design: dict,
                      test: list) -> tuple:
    """``test`` on a position study's runs (:func:`read_study`): the
    paired t (:func:`~mmpos_stats.paired`, as the study's own tables) of
    the arm's per-seed values of the task (:func:`_study_values`) against
    the other arm's, or against 0 (:func:`_other`), over the design's
    confirmation seeds that both arms ran (a seed is one initial draw,
    one order of batches and flips for every scheme: the pairs). Fewer
    than 2 pairs: no test. Returns ``(comparison or None, 'paired', pairs,
    why there is none)``."""
    arm, task = test[:2]
    other = _other(design, test, study)
    if other == arm:
        raise BadInputError(f'{path}: {test!r} compares {arm} with itself '
                            f'({where})')
    names = [arm] + ([] if other == ZERO else [other])
    runs = {}
    for name in names:
        scheme = name.partition(' +')[0]
        stored = study['runs'].get(_folder(scheme))
        if not stored:
            folder = osp.join(path, 'runs', _folder(scheme))
            return None, 'paired', 0, f'no runs of {scheme} in {folder}'
        runs[scheme] = stored
    both = set.intersection(*(set(r) for r in runs.values()))
    common = sorted(both & set(design['seeds']['confirmation']))
    if not common:
        outside = f'; both ran {sorted(both)}, not confirmation seeds' \
            if both else ''
        return None, 'paired', 0, ('no seed of seeds.confirmation run by '
                                   f'both arms{outside}')
    runs = {scheme: {k: r[k] for k in common} for scheme, r in runs.items()}
    values = [_study_values(runs, task, name, path, where)
              for name in names]
    why = next((v for v in values if isinstance(v, str)), None)
    if why:
        return None, 'paired', len(common), why
    return (stats.paired(values[0], values[1] if len(values) == 2 else
                         [0.0] * len(common)), 'paired', len(common), None)


def study_coverage(design: dict, study: dict) -> str:
    """One line on a position study's runs (:func:`read_study`) against
    the design: per trained arm (an arm without `` +``: the confirmation
    seeds; an exploratory arm: its seeds) the seeds without a run file,
    and the runs at seeds outside the design, which :func:`judge` leaves
    out."""
    exploratory = design.get('exploratory') or dict(arms=[], seeds=[])
    missing, outside = [], []
    for arm in [a for a in design['arms'] if ' +' not in a] + \
            exploratory['arms']:
        planned = exploratory['seeds'] if arm in exploratory['arms'] else \
            design['seeds']['confirmation']
        stored = study['runs'].get(_folder(arm)) or {}
        gone = sorted(set(planned) - set(stored))
        if gone:
            missing.append(f'{arm}: seeds {gone}' if stored else
                           f'{arm}: no runs')
        extra = sorted(set(stored) - set(design['seeds']['confirmation']))
        if extra:
            outside.append(f'{arm}: seeds {extra}')
    return (f'Missing runs (design seeds without a run file): '
            f'{"; ".join(missing) or "none"}. Left out (seeds outside '
            f'seeds.confirmation): {"; ".join(outside) or "none"}.')


def _side(summary: dict, path: str, where: str, task: str,
          name: str) -> dict:
    """The summary's entry of ``name`` (an arm or a baseline, the design's
    name) on ``task``, refused in one line naming the key when missing."""
    spec = summary['tasks'].get(task)
    if not isinstance(spec, dict) or 'metrics' not in spec or \
            'inits' not in spec:
        raise BadInputError(f'{path}: no tasks.{task} with metrics and inits '
                            f'({where})')
    group = 'baselines' if name in BASELINES else 'inits'
    shown = ARM_NAMES.get(name, name)
    if shown not in (spec.get(group) or {}):
        raise BadInputError(f'{path}: no tasks.{task}.{group}.{shown!r} '
                            f'({where})')
    return spec


def _against_baseline(summary: dict, spec: dict, arm: str,
                      base: str) -> tuple:
    """``arm`` against a baseline row: the arm's per-run values (per
    pretraining run the mean over its transfer seeds, complete runs only,
    as the ranking's tests take them) against the row's values, each a run
    (raw pixels: one per probe seed); Welch with 2 values or more, with
    one (the image-free prior, a deterministic probe's raw pixels) the
    one-sample t against it (the ranking's informativeness test). Returns
    ``(comparison or None, method, n_b)``."""
    key = seeds._first(spec)
    row = spec['baselines'][ARM_NAMES.get(base, base)][key]['groups']
    values = [v for g in row for v in g if v is not None]
    sample = seeds._run_means(summary, spec, ARM_NAMES.get(arm, arm))
    if not sample or not values:
        return None, 'welch', len(values)
    if len(values) > 1:
        return stats.welch(sample, values), 'welch', len(values)
    found = stats.paired(sample, values * len(sample))
    if found.pvalue is None and len(sample) < 2:
        found = dataclasses.replace(found, reason=f'{len(sample)} run of '
                                    f'{arm}, fewer than 2')
    return found, 'one-sample t', 1


def _comparison(summary: dict, path: str, where: str, design: dict,
             test: list) -> tuple:
    """``test`` (``[arm, task]`` or ``[arm, task, other]``) on the
    summary: ``(comparison or None, method, n_b, why there is none)``;
    between inits the ranking's own test (:func:`~.comparison.seeds.
    _compare`); on a position study :func:`_study_comparison`."""
    if STUDY in summary:
        return _study_comparison(summary, path, where, design, test)
    arm, task = test[:2]
    other = _other(design, test, summary)
    spec = _side(summary, path, where, task, arm)
    _side(summary, path, where, task, other)
    if other in BASELINES:
        return (*_against_baseline(summary, spec, arm, other), None)
    found = seeds._compare(summary, spec, seeds._first(spec),
                           ARM_NAMES.get(arm, arm),
                           ARM_NAMES.get(other, other))
    method = 'welch' if summary.get('pretrain_seeds') else 'paired'
    return found, method, None if found is None else found.n_b, None


def _margin_levels(pvalues: List[Optional[float]], p_adj: list,
                   correction: str, alpha: float) -> list:
    """Per test of an above-margin family the one-sided level of its
    interval, the level at which the correction judges it: Holm at step
    ``j`` (its p the ``j``-th smallest of ``m``) ``alpha / (m - j + 1)``
    for the ``R`` tests it rejects, ``alpha / (m - R)`` (the step where it
    stopped) for the others; Benjamini-Hochberg ``max(R, 1) alpha / m``
    (it rejects exactly the p values up to ``R alpha / m``). So the lower
    end clears the margin exactly when the adjusted p is below ``alpha``.
    None for a test without p."""
    index = [i for i, p in enumerate(pvalues) if p is not None]
    m = len(index)
    rejected = sum(p_adj[i] < alpha for i in index)
    out: List[Optional[float]] = [None] * len(pvalues)
    order = sorted(index, key=lambda i: pvalues[i])  # stable, as adjust
    for step, i in enumerate(order, 1):
        if correction == stats.HOLM:
            out[i] = alpha / (m - step + 1) if p_adj[i] < alpha else \
                alpha / (m - rejected)
        else:
            out[i] = max(rejected, 1) * alpha / m
    return out


def _above_margin(found: List[Optional[stats.Comparison]],
                  margins: List[float], correction: str,
                  alpha: float) -> List[tuple]:
    """``(low, high, confidence, p, p_adj, verdict)`` per test of an
    above-margin family (:func:`judge`)."""
    from scipy.stats import t as student_t
    pvalues = [None if c is None or c.pvalue is None else
               float(student_t.sf((c.difference - margin) / c.se, c.df))
               for c, margin in zip(found, margins)]
    p_adj = stats.adjust(pvalues, correction)
    levels = _margin_levels(pvalues, p_adj, correction, alpha)
    out = []
    for c, p, q, level in zip(found, pvalues, p_adj, levels):
        if p is None:
            out.append((None, None, None, None, None, 'no test' if c is None
                        else c.verdict))
            continue
        half = float(student_t.ppf(1 - level, c.df)) * c.se
        out.append((c.difference - half, c.difference + half, 1 - 2 * level,
                    p, q, ABOVE if q < alpha else 'no verdict'))
    return out


def judge(design: dict, summary: dict,
          path: str = 'summary') -> List[Judged]:
    """Every family of ``design`` (:func:`load`) judged on a runner's
    ``summary`` (:func:`read_summary`; ``path`` names it in errors), one
    :class:`Judged` per test in the families' order.

    Each test compares the per-run values of the task's first metric, as
    the ranking's table does (:mod:`~.comparison.seeds`): with
    pretraining seeds Welch's t on the per-pretraining-run means (each
    the mean over its transfer seeds, complete runs only), without them
    the paired t over the shared transfer seeds; against a baseline row
    (``pixels``: one value per probe seed; ``image-free``: one value)
    Welch on the row's values as runs, and against a row of one value
    (a fixed number: the image-free prior, a deterministic probe's raw
    pixels) the one-sample t of the arm's runs against it (``nu = P -
    1``). The p values are adjusted within each family by its correction
    (:func:`~mmpos_stats.adjust`):

    * ``difference``: the two-sided test, ``higher`` / ``lower`` when its
      adjusted p is below alpha (:class:`~mmpos_stats.Comparison`); its
      95 % t interval.
    * ``equivalence``: :func:`~mmpos_stats.tost` within the task's
      margin, ``equivalent`` when its adjusted p is below alpha; its 90 %
      interval.
    * ``above_margin``: the one-sided test of ``H0: delta <= margin``,
      ``p = P(T_nu > (D - margin) / SE)``, ``above margin`` when its
      adjusted p is below alpha. Its interval is at the level the
      correction judges the test at (Holm: the Bonferroni level of its
      step, ``alpha / (m - j + 1)``, or of the step where Holm stopped;
      :func:`_margin_levels`), so that its lower end lies above the margin
      exactly when the verdict is ``above margin``: the interval a reader
      sees agrees with the verdict. These are each test's intervals at
      its step's level, not simultaneous intervals for the family.

    On a position study's directory (:func:`read_study`) each test is the
    paired t over the design's confirmation seeds both arms ran, on the
    per-seed values of the task, the study's own test
    (:func:`_study_comparison`); a run at another seed is left out, an
    arm without runs has no test (its reason names the folder).

    An arm with fewer than 2 runs has no test (``no test``, with the
    reason); a missing task, arm or baseline row is refused in one line
    naming the summary's key. The verdicts are at
    :data:`mmpos_stats.ALPHA`; a design with another alpha is refused."""
    name = design['study']
    if design['alpha'] != stats.ALPHA:
        raise BadInputError(f'design {name}: alpha {design["alpha"]} '
                            f'(the verdicts are at {stats.ALPHA})')
    margins = design.get('margins') or {}
    out = []
    for fam_name, fam in design['families'].items():
        kind = fam.get('kind', 'difference')
        found, methods, sizes, whys = [], [], [], []
        for test in fam['tests']:
            comparison, method, n_b, why = _comparison(
                summary, path, f'design {name}, family {fam_name}, test '
                f'{test}', design, test)
            found.append(comparison)
            methods.append(method)
            sizes.append(n_b)
            whys.append(why or 'no complete run on a side')
        margin = [margins.get(test[1]) for test in fam['tests']]
        mdds = [None] * len(found)
        if kind == 'above_margin':
            cells = _above_margin(found, margin, fam['correction'],
                                  design['alpha'])
        else:
            tests = [c if c is None or kind == 'difference' else
                     stats.tost(c, m) for c, m in zip(found, margin)]
            judged = iter(stats.family([t for t in tests if t is not None],
                                       fam['correction']))
            cells = []
            for k, t in enumerate(tests):
                t = None if t is None else next(judged)
                cells.append((None, None, None, None, None, 'no test')
                             if t is None else
                             (t.low, t.high, None if t.pvalue is None else
                              1 - 2 * stats.ALPHA if kind == 'equivalence'
                              else 1 - stats.ALPHA, t.pvalue, t.p_adj,
                              t.verdict))
                if t is not None and kind == 'difference':
                    mdds[k] = stats.family_mdd(t)
        for test, c, method, n_b, m, cell, why, mdd in zip(
                fam['tests'], found, methods, sizes, margin, cells, whys,
                mdds):
            out.append(Judged(
                fam_name, kind, test[0], test[1],
                _other(design, test, summary), method,
                None if c is None else c.difference,
                0 if c is None else c.n_a, n_b or 0, *cell[:5],
                m if kind != 'difference' else None, cell[5],
                why if c is None else c.reason,
                se=None if c is None else c.se, mdd=mdd))
    return out


def achieved_power(design: dict, judged: List[Judged]) -> Dict[str, list]:
    """Per family, per ``power.effects`` entry among its tests, the power
    its paired test had: :func:`paired_power` at the effect's ``delta``
    with the observed SD of the per-seed differences (``se sqrt(n)``) over
    the ``n`` pairs it had, at the level the design plans it at
    (``alpha / m`` of the largest family holding it, as :func:`effects`).
    ``{family: [{test, delta, sd, pairs, level, power}]}`` (``sd`` and
    ``power`` None without a paired test); a family without an effect
    maps to ``[]``."""
    out: Dict[str, list] = {}
    for fam_name, fam in design['families'].items():
        rows = [r for r in judged if r.family == fam_name]
        out[fam_name] = []
        for effect in design['power'].get('effects') or []:
            if effect['test'] not in fam['tests']:
                continue
            row = rows[fam['tests'].index(effect['test'])]
            level = _level(design, effect['test'])
            sd = None if row.se is None or row.method != 'paired' else \
                row.se * math.sqrt(row.n_a)
            out[fam_name].append(dict(
                test=effect['test'], delta=effect['delta'], sd=sd,
                pairs=row.n_a, level=level,
                power=None if sd is None else paired_power(
                    sd, effect['delta'], row.n_a, level)))
    return out


def judgement_markdown(design: dict, judged: List[Judged]) -> str:
    """A markdown table per family of :func:`judge`'s rows: the test (a
    paired test with its pairs), the margin, the difference with its
    interval (and the interval's confidence), the adjusted p and the
    verdict (a difference family: and its minimum detectable difference,
    :attr:`Judged.mdd`); under it the power each of the design's effects
    in the family had with the observed SD (:func:`achieved_power`), or
    that the design states none."""
    lines = []
    power = achieved_power(design, judged)
    for fam_name, fam in design['families'].items():
        rows = [r for r in judged if r.family == fam_name]
        kind = fam.get('kind', 'difference')
        size = sum(r.p_adj is not None for r in rows)
        mdd = kind == 'difference'
        lines += [f'### {fam_name}', '',
                  f'{kind}, {stats.CORRECTIONS[fam["correction"]]} over '
                  f'{size} test{"s" * (size != 1)} (α {design["alpha"]})',
                  '', '| test | margin | difference [interval] | p_adj | '
                  'verdict |' + ' MDD |' * mdd,
                  '| --- | --- | --- | --- | --- |' + ' --- |' * mdd]
        for r in rows:
            pairs = f', {r.n_a} pairs' if r.method == 'paired' and \
                r.n_a else ''
            what = (f'{ARM_NAMES.get(r.arm, r.arm)} − '
                    f'{ARM_NAMES.get(r.other, r.other)}, {r.task} '
                    f'({r.method}{pairs})')
            if r.difference is None:
                cell = 'missing'
            elif r.low is None:
                cell = f'{r.difference:+.2f}'
            else:
                cell = (f'{r.difference:+.2f} [{r.low:.2f}, {r.high:.2f}] '
                        f'({100 * r.confidence:.3g} %)')
            verdict = r.verdict + (f' ({r.reason})' if r.reason else '')
            row = (f'| {what} | '
                   f'{"-" if r.margin is None else f"{r.margin:g}"} | '
                   f'{cell} | '
                   f'{"-" if r.p_adj is None else stats.format_p(r.p_adj)}'
                   f' | {verdict} |')
            if mdd:
                row += ' - |' if r.mdd is None else f' {r.mdd:.2f} |'
            lines.append(row)
        lines += [''] + _power_lines(design, fam, power[fam_name]) + ['']
    return '\n'.join(lines)


def _power_lines(design: dict, fam: dict, found: List[dict]) -> List[str]:
    """The lines under a family's table on its power
    (:func:`achieved_power`'s entries ``found``)."""
    if found:
        lines = ['Power at the design\'s effects (paired t, two-sided, the '
                 'observed SD of the per-seed differences):', '']
        for e in found:
            arm, task = e['test'][:2]
            other = e['test'][2] if len(e['test']) == 3 else \
                design['reference']
            lines.append(
                f'- {arm} − {other}, {task}: Δ {e["delta"]:g} at α '
                f'{e["level"]:.3g}: ' + (
                    'no paired test, no observed SD' if e['power'] is None
                    else f'over {e["pairs"]} pairs, SD {e["sd"]:.2f}: power '
                    f'{e["power"]:.2f}'))
        return lines
    planned = sorted({t[1] for t in fam['tests']} &
                     set(design['power'].get('deltas') or {}))
    if planned:
        return [f'power.deltas plans {", ".join(planned)} per task (Welch, '
                'the stored per-run SD); the power achieved is not '
                'recomputed here.']
    return ['The design states no effect size for this family '
            '(power.effects): no power computed.']
