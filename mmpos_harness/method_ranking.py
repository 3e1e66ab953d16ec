"""CPU method ranking: every pretraining method that fits the demo's tiny
RoPE-Mixed ViT (DropPos, CR2PQ, DINOv2, ICPF and, as the peer, mmpretrain's
MAE on that ViT), plus random init, each tuned alike, pretrained with
several seeds and scored first by frozen probes, then by fine-tuning; one
ranked table with health columns written by
``tools/paper_tables/gen_tables.py --seeds``.

    python tools/paper_tables/method_ranking.py --tune [options]   # stage 1
    python tools/paper_tables/method_ranking.py [options]          # stage 2

Options: ``--work-dir work_dirs/method_ranking --data-root data/mini
--methods droppos cr2pq dinov2 icpf mae random --pretrain-seeds 0 1 2
--seeds 0 1 2 --tasks linear-probe knn segmentation detection
--batch-size 32 --images 96000 --grid configs/method_ranking/
tuning_grid.json --jobs 2`` (the defaults); for smoke runs
``--max-configs N --probe-iters N --iters N``.

Equal treatment: every method pretrains at 64 px (an 8 x 8 patch grid)
with the same batch size (``--batch-size``) for the same number of images
(``--images``; iterations = images / batch, each method's schedule
stretched to them by :func:`~.comparison.runs.schedule_options`); the CPU
minutes each took are in the table beside the results. Methods that
pretrain with an APE (DINOv2, ICPF) are evaluated with it
(:func:`keeps_ape`). ``--tune`` pretrains every configuration of the tuning
grid (one data file, the same number of entries per method) with every
``--tune-seeds`` seed at the ranking's ``--images`` and scores each run
with the linear probe on the tuning data (``<data-root>/tune``: the mini
generators drawn with ``--seed 1``, images the reported probes never see);
it writes ``<work-dir>/tuning.json`` and ``tuning.md``: every
configuration's scores, the chosen one per method with its margin over the
runner-up and the grid edges it sits on, and the pretraining runs per
method that detect ``--target`` points at 80 % power (:func:`choose`).
The ranking stage refuses to run without ``tuning.json`` at its own
``--images`` unless ``--untuned`` (every method's first grid entry, its
shipped mini recipe), and prints the power line above its table.

Seeds: each method is pretrained with every ``--pretrain-seeds`` seed (random
init: that many random draws of the backbone), each transferred with every
``--seeds`` seed; the differences are tested as :mod:`~.comparison.seeds`
says (Welch's t on the per-pretraining-run means, Holm over the table,
:mod:`mmpos_stats`). The pretraining runs log
HealthMonitorHook's collapse monitors (every mini config has it); a
collapsed run flags its method in the table, which still ranks it.

Not part of CI. Both stages resume: the work dir is fixed, finished runs are
skipped and an interrupted one is restarted; run the same command again.
Each finished tuning run (a pretraining and its probes) is also kept in
``<work-dir>/tuning/runs/<method>-<entry>_pseed<p>.json`` with its scores
and provenance: a tuning spread over machines or sessions resumes from
those files alone (no checkpoints), and refuses one made at another
budget, options or probes.
Every result file is written atomically, so a ranking killed at any moment
resumes to the same tables; a second ranking on the same ``--work-dir``
is refused while one runs (:func:`mmpos.guardrails.launch.work_dir_lock`).
QB-Heat is left out: its backbone (MobileFormer) is not the ViT the
transfer configs build.

Baselines: every frozen probe also runs its image-free baseline
(:func:`image_free_metrics`, once) and the raw pixels (``pixels`` through
the probe's tool, with its seeds), rows of the table that are not ranked;
a probe whose best method is not above the image-free row is marked not
informative and left out of the ranking
(:mod:`~.comparison.seeds`).
"""
import argparse
import json
import os
import os.path as osp
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from mmengine.config import Config

import mmpos_stats as stats
from mmpos.checkpoint import write_atomically
from mmpos.evaluation.dense_suite import RAW_PIXELS as PIXELS
from mmpos.guardrails.cli import cli_main
from mmpos.guardrails.config_check import lookup_path
from mmpos.guardrails.launch import work_dir_lock

from . import provenance
from .comparison import runs, seeds
from .comparison.seeds import COMPUTE, minutes, pretrain_health, write_json

# method -> (table name, pretraining config with the demo's backbone)
CONFIGS = 'configs/method_ranking/'
METHODS = {
    'droppos': ('DropPos', CONFIGS + 'droppos_vit-tiny-rope-mixed_mini.py'),
    'cr2pq': ('CR2PQ', CONFIGS + 'cr2pq_vit-tiny-rope-mixed_mini.py'),
    'dinov2': ('DINOv2', CONFIGS + 'dinov2_vit-tiny-rope-mixed_mini.py'),
    'icpf': ('ICPF', CONFIGS + 'icpf_vit-tiny-rope-mixed_mini.py'),
    'mae': ('MAE', CONFIGS + 'mae_vit-tiny-rope-mixed_mini.py'),
    'random': (runs.RANDOM_INIT, None),
}
# Orderings between the ranked methods that the papers report (all with
# fine-tuning at ImageNet scale; none with frozen probes), checked on the
# ranking's tasks in ``<work-dir>/tables/orderings.md`` (through plan.json).
PAPER_ORDERINGS = [
    ('DropPos', 'MAE', 'DropPos Tab. 6: ViT-B/16, 200 epochs each, COCO '
     '42.1 vs 40.1 AP^bb, ADE20K 40.7 vs 40.5 mIoU'),
    ('MAE', 'DropPos', 'ICPF Tab. 1: ViT-B/16, MAE 1600 / DropPos 800 '
     'epochs, COCO 48.1 vs 47.0 AP^bb, ADE20K 46.2 vs 45.3 mIoU'),
    ('ICPF', 'DINOv2', 'ICPF Tab. 1: ViT-B/16, 350 effective epochs each, '
     'COCO 49.2 vs 47.7 AP^bb, ADE20K 48.4 vs 47.5 mIoU'),
    ('DINOv2', 'DropPos', 'ICPF Tab. 1: COCO 47.7 vs 47.0 AP^bb, ADE20K '
     '47.5 vs 45.3 mIoU'),
    ('CR2PQ', 'MAE', 'CR2PQ Tab. 3: ViT-B/16, 300 epochs each, ImageNet '
     'fine-tuning 83.7 vs 83.2 top-1'),
    ('CR2PQ', 'DINOv2', 'CR2PQ Tab. 1-2 against DINO (v1): ViT-S/16, COCO '
     '47.4 vs 40.8 AP^bb, ADE20K 47.0 vs 42.3 mIoU'),
    ('DropPos', runs.RANDOM_INIT, 'DropPos Tab. 5: ViT-B/16, ImageNet '
     'fine-tuning 83.0 vs 80.9 top-1 from scratch'),
    ('CR2PQ', runs.RANDOM_INIT, 'CR2PQ Tab. 1: ViT-S/16, COCO Cascade '
     'Mask R-CNN 50.5 vs 31.0 AP^bb from scratch'),
]
GRID = CONFIGS + 'tuning_grid.json'
# the code the ranking's numbers go through, beside its configs and probe
# tools (mmpos_harness.provenance)
CODE = ('mmpos/models', 'mmpos/datasets', 'mmpos/engine', 'mmpos/evaluation',
        'mmpos/checkpoint', 'mmpos_harness/method_ranking.py',
        'mmpos_harness/comparison/runs.py', 'mmpos_harness/mini_data',
        'tools/train.py', 'tools/model_converters/mmpos2backbone.py', GRID)
TUNING = 'tuning.json'
# <work-dir>/tuning/<TUNING_RUNS>/<method>-<entry>_pseed<p>.json: one
# finished tuning run (pretraining and probes) with its provenance; a
# resumed tuning takes it as done without its pretraining's files
TUNING_RUNS = 'runs'
# the probes' raw-pixel baseline row (its tools take the checkpoint PIXELS)
RAW_PIXELS = 'raw pixels'
# The tuning data: the reported sets' generators with another seed.
TUNE_SEED = 1
# Score that picks a configuration: the linear probe's mIoU.
TUNE_TASK, TUNE_METRIC = 'linear-probe', 'mIoU'


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--tune', action='store_true',
                        help='stage 1: run the tuning grid, write '
                        'tuning.json / tuning.md')
    parser.add_argument('--untuned', action='store_true',
                        help='rank with every method\'s first grid entry '
                        'instead of tuning.json')
    parser.add_argument('--work-dir', default='work_dirs/method_ranking')
    parser.add_argument('--data-root', default='data/mini')
    parser.add_argument('--methods', nargs='+', choices=list(METHODS),
                        default=list(METHODS))
    parser.add_argument('--pretrain-seeds', type=int, nargs='+',
                        default=[0, 1, 2])
    parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2],
                        help='transfer seeds')
    parser.add_argument('--tasks', nargs='+', default=[
        *runs.PROBES, *runs.TASKS], choices=[*runs.PROBES, *runs.TASKS])
    parser.add_argument('--batch-size', type=int, default=32)
    parser.add_argument('--images', type=int, default=96000,
                        help='pretraining images seen by every method '
                        '(iterations = images / batch size)')
    parser.add_argument('--tune-seeds', type=int, nargs='+', default=[0, 1],
                        help='pretraining seeds of every tuning '
                        'configuration')
    parser.add_argument('--target', type=float, default=2.0,
                        help='the difference of the tuning metric (points) '
                        'the ranking should detect at 80%% power; the '
                        'tuning prints the pretraining runs per method it '
                        'needs')
    parser.add_argument('--grid', default=GRID)
    parser.add_argument('--max-configs', type=int, default=None,
                        help='only the first N grid entries per method '
                        '(smoke runs)')
    parser.add_argument('--probe-iters', type=int, default=None,
                        help='shorten the linear probe (smoke runs)')
    parser.add_argument('--iters', type=int, default=None,
                        help='shorten the fine-tuning runs (smoke runs)')
    parser.add_argument('--jobs', type=int, default=2,
                        help='runs at a time, each single-threaded (1: one '
                        'at a time with all threads)')
    return parser.parse_args(argv)


def load_grid(path, methods):
    """``{method: [{'name', 'options'}]}`` of the tuning grid file, checked
    (every method present, the same number of entries each)."""
    with open(path) as f:
        grid = json.load(f)
    pretrained = [m for m in methods if METHODS[m][1]]
    for method in pretrained:
        entries = grid.get(method)
        if not entries or any(set(e) != {'name', 'options'}
                              for e in entries):
            raise SystemExit(f'{path}: {method!r} needs a list of '
                             "{'name', 'options'} entries")
    sizes = {len(grid[m]) for m in pretrained}
    if len(sizes) > 1:
        raise SystemExit(f'{path}: methods have different tuning budgets '
                         f'{ {m: len(grid[m]) for m in pretrained} }')
    return grid


def budget_options(args):
    """``--cfg-options`` of the shared batch size (the image budget is the
    iterations, see :func:`pretrain_iters`)."""
    return [f'train_dataloader.batch_size={args.batch_size}']


def pretrain_iters(args):
    if args.images % args.batch_size:
        raise SystemExit(f'--images {args.images} is not a multiple of '
                         f'--batch-size {args.batch_size}')
    return args.images // args.batch_size


def keeps_ape(method):
    """Whether ``method`` pretrains with an APE (its config's backbone
    ``use_ape``; DINOv2, ICPF), so that every evaluation keeps it
    (:data:`~.comparison.runs.APE_PROBE_CONFIG`); refused with one line
    when that config's APE grid is not the pretraining one."""
    config = METHODS[method][1]
    if not config:
        return False
    backbone = Config.fromfile(config).model.backbone
    if not backbone.get('use_ape'):
        return False
    probe = Config.fromfile(runs.APE_PROBE_CONFIG).model.backbone
    if probe.img_size != backbone.img_size:
        raise SystemExit(f'{config}: pretrains its APE at img_size '
                         f'{backbone.img_size}, but {runs.APE_PROBE_CONFIG} '
                         f'evaluates it at {probe.img_size}')
    return True


def _numbers(config, entries):
    """``{key: [value per entry]}`` of the numeric ``--cfg-options`` keys
    that take at least 3 values over ``entries`` (an entry without the key
    has the config's value)."""
    cfg = Config.fromfile(config)
    keys = {o.split('=', 1)[0] for e in entries for o in e['options']}
    out = {}
    for key in sorted(keys):
        values = []
        for entry in entries:
            given = [o.split('=', 1)[1] for o in entry['options']
                     if o.split('=', 1)[0] == key]
            parent, found = lookup_path(cfg, key.split('.'))
            try:
                values.append(float(given[0] if given else
                                    parent[key.rsplit('.', 1)[1]]))
            except (KeyError, TypeError, ValueError):  # missing or no number
                break
        else:
            if len(set(values)) >= 3:
                out[key] = values
    return out


def grid_edges(config, entries, chosen):
    """The grid axes on whose edge the ``chosen`` entry (a name) sits: a
    numeric option with at least 3 values over ``entries`` whose chosen
    value is the smallest or the largest, e.g. ``['optim_wrapper.optimizer
    .lr = 0.002, the largest of 0.0005 .. 0.002']``."""
    index = [e['name'] for e in entries].index(chosen)
    edges = []
    for key, values in _numbers(config, entries).items():
        value = values[index]
        if value in (min(values), max(values)):
            side = 'largest' if value == max(values) else 'smallest'
            edges.append(f'{key} = {value:g}, the {side} of '
                         f'{min(values):g} .. {max(values):g}')
    return edges


def tune(args, grid):
    """Stage 1: pretrain every grid entry with every ``--tune-seeds`` seed
    at the ranking's image budget, probe each run on the tuning data;
    choose per method the entry with the highest mean, report its margin
    over the runner-up (paired by seed, Holm over the methods) and the
    grid axes it sits on the edge of, and the pretraining runs per method
    the ranking needs for ``--target`` (the run SD pooled over every
    configuration); write ``tuning.json`` / ``tuning.md``; returns the
    log."""
    probes = [TUNE_TASK] + [t for t in args.tasks
                            if t in runs.PROBES and t != TUNE_TASK]
    tune_data = runs.ensure_probe_data(
        osp.join(args.data_root, 'tune'), probes,
                                  TUNE_SEED)
    iters = pretrain_iters(args)
    threads = 1 if args.jobs > 1 else None
    root = osp.join(args.work_dir, 'tuning')
    entries = {m: grid[m][:args.max_configs] for m in args.methods
               if METHODS[m][1]}
    ape = {m: keeps_ape(m) for m in entries}
    jobs = [(m, e, p) for m, es in entries.items() for e in es
            for p in args.tune_seeds]
    code = depends()

    def one(method, entry, pseed):
        init = f'{method}-{entry["name"]}'
        setting = dict(images=args.images, batch_size=args.batch_size,
                       options=entry['options'], probes=probes,
                       probe_iters=args.probe_iters)
        path = osp.join(root, TUNING_RUNS, f'{init}_pseed{pseed}.json')
        if osp.isfile(path):
            return finished_tuning_run(path, setting)
        backbone = runs.pretrain(
            METHODS[method][1], root, init, args.data_root, iters,
            budget_options(args) + entry['options'], threads, pseed,
            ape[method])
        scores = {task: runs.probe(root, task, init, 0, tune_data, backbone,
                                   pseed, args.probe_iters, threads,
                                   ape[method])
                  for task in probes}
        health = pretrain_health([osp.dirname(backbone)])
        result = dict(seed=pseed, scores=scores, health=health,
                      cpu_minutes=minutes(osp.dirname(backbone),
                                          'cpu_minutes'),
                      collapsed=bool(health and health['collapsed']))
        write_json(path, dict(result, setting=setting, **provenance.record(
            args.command, code)))
        return result

    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda job: one(*job), jobs))
    log = dict(grid=args.grid, images=args.images, probes=probes,
               batch_size=args.batch_size, data=tune_data,
               seeds=args.tune_seeds, target=args.target,
               selected_by=f'mean {TUNE_TASK} {TUNE_METRIC} over the '
               f'pretraining seeds on {tune_data}, configurations with a '
               'collapsed run excluded', methods={})
    done = dict(zip([(m, e['name'], p) for m, e, p in jobs], results))
    for method, es in entries.items():
        configs = []
        for e in es:
            per_seed = [done[method, e['name'], p] for p in args.tune_seeds]
            configs.append(dict(
                name=e['name'], options=e['options'], runs=per_seed,
                scores={t: _mean_scores([r['scores'][t] for r in per_seed])
                        for t in probes},
                health=per_seed[0]['health'],
                cpu_minutes=_mean([r['cpu_minutes'] for r in per_seed]),
                collapsed=any(r['collapsed'] for r in per_seed)))
        log['methods'][method] = dict(configs=configs)
    choose(log, entries, args)
    write_json(osp.join(args.work_dir, TUNING), log)
    write_atomically(tuning_markdown(log).encode(),
                     osp.join(args.work_dir, 'tuning.md'))
    return log


def finished_tuning_run(path, setting):
    """The result of the tuning run stored at ``path`` (written when it
    finished, :func:`tune`); refused with one line when it was run with
    another ``setting`` (budget, options, probes)."""
    with open(path) as f:
        stored = json.load(f)
    if stored['setting'] != setting:
        changed = sorted(k for k in setting
                         if stored['setting'].get(k) != setting[k])
        raise SystemExit(f'{path}: this tuning run was made with other '
                         f'{", ".join(changed)} '
                         f'({[stored["setting"].get(k) for k in changed]}, '
                         f'now {[setting[k] for k in changed]}); give '
                         'another --work-dir or remove it')
    print(f'done already: {path}')
    return {k: stored[k] for k in ('seed', 'scores', 'health',
                                   'cpu_minutes', 'collapsed')}


def _mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _mean_scores(per_seed):
    """``{metric: mean over seeds}`` of a probe's per-seed metrics."""
    return {k: _mean([m.get(k) for m in per_seed]) for k in per_seed[0]}


def _tune_values(config):
    """A configuration's tuning metric per pretraining seed."""
    return [r['scores'][TUNE_TASK].get(TUNE_METRIC, -1) for r in
            config['runs']]


def choose(log, entries, args):
    """Per method of ``log``: the chosen entry (highest mean of the tuning
    metric, configurations with a collapsed run excluded), its margin over
    the runner-up (:func:`mmpos_stats.paired` over the seeds,
    Holm over the methods), the grid axes it sits on the edge of
    (:func:`grid_edges`); and ``log['power']``: the pretraining-run SD
    pooled over every configuration (:func:`~mmpos_stats.
    pooled_sd`) and the runs per method that detect ``--target``
    (:func:`~mmpos_stats.runs_for_difference`)."""
    margins = {}
    for method, entry in log['methods'].items():
        healthy = [c for c in entry['configs'] if not c['collapsed']]
        ordered = sorted(healthy or entry['configs'],
                         key=lambda c: _mean(_tune_values(c)), reverse=True)
        entry['chosen'] = ordered[0]['name']
        entry['edges'] = grid_edges(METHODS[method][1], entries[method],
                                    entry['chosen'])
        if len(ordered) > 1:
            entry['runner_up'] = ordered[1]['name']
            margins[method] = stats.paired(_tune_values(ordered[0]),
                                           _tune_values(ordered[1]))
    for method, comparison in zip(margins, stats.family(
            list(margins.values()), stats.HOLM)):
        log['methods'][method]['margin'] = comparison.asdict()
    groups = [[v * runs.PROBES[TUNE_TASK]['scale'] for v in _tune_values(c)]
              for entry in log['methods'].values()
              for c in entry['configs']]
    if any(len(g) > 1 for g in groups):
        sd, df = stats.pooled_sd(groups)
        log['power'] = dict(sd=sd, df=df, target=args.target,
                            runs=stats.runs_for_difference(sd, args.target)
                            if sd > 0 else None)


def power_line(power, pretrain_seeds=None):
    """The tuning's power analysis in one line (``power``: ``tuning.json``'s
    ``power``); with ``pretrain_seeds``, what the ranking's runs detect."""
    label = f'{runs.PROBES[TUNE_TASK]["label"]} {TUNE_METRIC}'
    line = (f'pretraining-run SD {power["sd"]:.2f} ({label}, pooled over the '
            f'tuning configurations, df {power["df"]})')
    if not power['runs']:
        return line + (': the runs of every configuration agree exactly, no '
                       'power analysis')
    line += (f': {power["runs"]} pretraining runs per method detect '
             f'{power["target"]:g} points at 80 % power')
    if pretrain_seeds is not None:
        n = len(pretrain_seeds)
        mdd = stats.minimum_detectable_difference(
            power['sd'] * (2 / n)**0.5, 2 * n - 2) if n > 1 else None
        line += (f'; this ranking has {n}' + (
            f' (detects {mdd:.1f})' if mdd else ' (no test)'))
    return line


def tuning_markdown(log):
    """The tuning log as one table (a row per method and configuration;
    per probe its first metric)."""
    probes = {t: next(iter(runs.PROBES[t]['metrics'].items()))
              for t in log['probes']}
    header = ['method', 'config', 'options',
              *[f'{runs.PROBES[t]["label"]} {label}'
                for t, (_, label) in probes.items()],
              'spread (init)', 'eff. rank (init)', 'pretrain CPU min',
              'collapsed', 'chosen']
    lines = [f'**Tuning** ({log["images"]} images, batch '
             f'{log["batch_size"]}, pretraining seeds {log["seeds"]}; '
             f'probe scores are means over the seeds, health columns the '
             f'first seed\'s; selected by {log["selected_by"]})', '',
             '| ' + ' | '.join(header) + ' |', '|' + ' --- |' * len(header)]
    for method, entry in log['methods'].items():
        for c in entry['configs']:
            scores = [c['scores'][t].get(key) for t, (key, _) in
                      probes.items()]
            health = c['health']
            lines.append('| ' + ' | '.join([
                method, c['name'], ' '.join(c['options']) or '-',
                *['missing' if v is None else
                  f'{v * runs.PROBES[t]["scale"]:.1f}'
                  for t, v in zip(probes, scores)],
                *seeds._fmt_health(health)[:2],
                f'{c["cpu_minutes"] or 0:.2f}',
                ('yes' if c['collapsed'] else 'no') if health is None or
                health.get('centred') else 'not judged',
                '**yes**' if c['name'] == entry['chosen'] else '']) + ' |')
    label = f'{runs.PROBES[TUNE_TASK]["label"]} {TUNE_METRIC}'
    lines += ['', f'Chosen configurations ({label}: the chosen minus the '
              'runner-up, paired by pretraining seed, [95 % interval], p '
              'adjusted by Holm over the methods; a margin without a '
              'verdict means the grid cannot tell the two apart):']
    for method, entry in log['methods'].items():
        margin = entry.get('margin')
        text = f'- {method}: {entry["chosen"]}'
        if margin:
            text += (f', over {entry["runner_up"]} ' + stats.format_cell(
                stats.Comparison.from_dict(margin)))
        if entry.get('edges'):
            text += '; on the edge of the grid: ' + '; '.join(entry['edges'])
        lines.append(text)
    if log.get('power'):
        lines += ['', 'Power: ' + power_line(log['power']) + '.']
    return '\n'.join(lines) + '\n'


def chosen_options(args, grid):
    """Per method, the grid entry's options the ranking pretrains with, how
    they were chosen (``'untuned'`` or the tuning log) and the tuning's
    power analysis (None untuned). A tuning at another image budget than
    ``--images`` is refused: recipes are chosen at the ranked length."""
    if args.untuned:
        return {m: grid[m][0]['options'] for m in args.methods
                if METHODS[m][1]}, 'untuned', None
    path = osp.join(args.work_dir, TUNING)
    if not osp.isfile(path):
        raise SystemExit(f'{path} missing: run with --tune first (or '
                         '--untuned for the shipped mini recipes)')
    with open(path) as f:
        tuning = json.load(f)
    if tuning['images'] != args.images:
        raise SystemExit(f'{path} tuned at {tuning["images"]} images, the '
                         f'ranking asks for --images {args.images}: tune at '
                         'the ranked length (--tune with the same --images)')
    log = tuning['methods']
    out = {}
    for m in args.methods:
        if not METHODS[m][1]:
            continue
        if m not in log:
            raise SystemExit(f'{path}: no tuning of {m!r}; rerun --tune '
                             'with it')
        out[m] = next(e['options'] for e in grid[m]
                      if e['name'] == log[m]['chosen'])
    return out, f'{TUNING} ({tuning["images"]} images)', tuning.get('power')


def rank(args, grid):
    """Stage 2: pretrain every method with every pretraining seed, probe
    and fine-tune with every transfer seed, write ``plan.json``."""
    options, tuning, power = chosen_options(args, grid)
    iters = pretrain_iters(args)
    root = args.work_dir
    tasks = {t: dict(runs.PROBES.get(t) or runs.TASKS[t])
             for t in args.tasks}
    for spec in tasks.values():
        if spec.get('seeded') is False:
            spec['seeds'] = args.seeds[:1]
    inits = [METHODS[m][0] for m in args.methods]
    runs.write_plan(
        root, f'CPU method ranking: {", ".join(inits)} -> '
        f'{", ".join(t["label"] for t in tasks.values())}, tiny RoPE-Mixed '
        'ViT', inits, args.seeds, tasks=tasks,
        pretrain_seeds=args.pretrain_seeds,
        budget=dict(batch=args.batch_size, images=args.images,
                    tuning=tuning, **({} if power is None else dict(
                        power=power_line(power, args.pretrain_seeds)))),
        orderings=[c for c in PAPER_ORDERINGS if {c[0], c[1]} <= set(inits)])
    probes = {t: spec for t, spec in tasks.items() if t in runs.PROBES}
    plan = seeds.load_plan(root)
    plan['baselines'] = {
        seeds.IMAGE_FREE: {t: args.seeds[:1] for t in probes},
        RAW_PIXELS: {t: spec.get('seeds', args.seeds)
                     for t, spec in probes.items()}}
    write_json(osp.join(root, seeds.PLAN), plan)
    runs.compare(root, [(METHODS[m][0], METHODS[m][1], iters,
                         budget_options(args) + options.get(m, []))
                        for m in args.methods],
                 args.seeds, args.data_root, args.jobs, args.iters,
                 args.pretrain_seeds, tasks, args.probe_iters,
                 ape={METHODS[m][0] for m in args.methods if keeps_ape(m)})
    baselines(args, plan['baselines'])


def image_free_metrics(task: str, data_root: str) -> dict:
    """Probe ``task``'s image-free baseline on ``data_root``'s data, as the
    probe's metric keys (Python floats): the linear probe's per-pixel
    class prior of the training labels, kNN's class prior (the memory
    bank's majority class, under kNN's key), the dense probes'
    :func:`~mmpos.evaluation.dense_suite.image_free_run`."""
    return {k: float(v) for k, v in _image_free(task, data_root).items()}


def _image_free(task: str, data_root: str) -> dict:
    from mmpos.apis.features import load_config
    spec = runs.PROBES[task]
    data = osp.join(data_root, spec['data'])
    if task == 'linear-probe':
        from mmpos.evaluation.dense_retrieval import class_prior_run
        return class_prior_run(load_config(spec['config']),
                               runs.DATA['img_size'], data)[0]
    if task == 'knn':
        from mmpos.evaluation.frozen import dataset_items
        from mmpos.evaluation.knn import class_prior_accuracy
        cfg = load_config(runs.KNN_DATA)
        (_, train, classes), (_, val, _) = (dataset_items(dict(
            cfg[f'{split}_dataloader'].dataset, data_root=data))
            for split in ('train', 'val'))
        top1 = class_prior_accuracy(train, val, len(classes))['top1']
        return {next(iter(spec['metrics'])): top1}
    from mmpos.evaluation.dense_suite import image_free_run
    return {f'{task}/{k}': v for k, v in image_free_run(
        task, load_config(spec['probe']), data).items()}


def baselines(args, rows):
    """The probes' baseline rows (``rows``: ``plan.json``'s
    ``baselines``): the image-free one computed here, the raw pixels
    through each probe's tool with every seed a probe draws
    (:func:`~.comparison.runs.probe` with ``pixels``). Finished runs are
    skipped, as the comparison's."""
    root = args.work_dir
    for task, task_seeds in rows[seeds.IMAGE_FREE].items():
        for seed in task_seeds:
            work_dir = seeds.transfer_dir(root, task, seeds.IMAGE_FREE, seed)
            if runs._fresh(work_dir):
                start, cpu = time.time(), time.process_time()
                metrics = image_free_metrics(task, args.data_root)
                os.makedirs(work_dir)
                write_json(osp.join(work_dir, 'metrics.json'), metrics)
                runs._finish(work_dir, start, time.process_time() - cpu)
    threads = 1 if args.jobs > 1 else None
    jobs = [(task, seed) for task, task_seeds in rows[RAW_PIXELS].items()
            for seed in task_seeds]
    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(lambda job: runs.probe(
            root, job[0], RAW_PIXELS, job[1], args.data_root, PIXELS,
            iters=args.probe_iters, threads=threads), jobs))


def depends():
    """The paths the ranking's numbers depend on: :data:`CODE`, every
    method's and task's config with its ``_base_`` chain, the probe
    tools."""
    configs = [c for _, c in METHODS.values() if c] + [
        spec['config'] for spec in {**runs.TASKS, **runs.PROBES}.values()]
    tools = [spec['tool'] for spec in runs.PROBES.values() if 'tool' in spec]
    return sorted({p for c in configs for p in provenance.config_sources(c)}
                  | set(tools) | set(CODE))


def record(args, stage, start):
    """``<work-dir>/<stage>_run.json``: the command, when it finished, the
    machine, this invocation's wall minutes and the CPU minutes of all the
    stage's runs (``compute.json``; resumed runs included)."""
    dirs = ([osp.join(args.work_dir, 'tuning')] if stage == 'tuning' else
            [osp.join(args.work_dir, d) for d in ('pretraining', *args.tasks)])
    cpu = sum(minutes(parent, 'cpu_minutes') or 0.0 for path in dirs
              for parent, _, files in os.walk(path) if COMPUTE in files)
    write_json(osp.join(args.work_dir, f'{stage}_run.json'), dict(
        **provenance.record(args.command, depends()),
        jobs=args.jobs, wall_minutes=round((time.time() - start) / 60, 1),
        cpu_minutes=round(cpu, 1)))


@cli_main('method_ranking.py')
def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    args.command = ' '.join(
        ['python', 'tools/paper_tables/method_ranking.py', *argv])
    if args.jobs < 1:
        raise SystemExit(f'method_ranking.py: --jobs must be at least 1, '
                         f'got {args.jobs}')
    if 'random' not in args.methods:
        args.methods.append('random')  # the reference of every difference
    start = time.time()
    grid = load_grid(args.grid, args.methods)
    # one ranking per work dir at a time; what it wrote stays (it resumes)
    with work_dir_lock(args.work_dir, keep_output=lambda: True):
        runs.ensure_data(args.data_root)
        runs.ensure_probe_data(args.data_root, args.tasks)
        if args.tune:
            tune(args, grid)
            record(args, 'tuning', start)
            with open(osp.join(args.work_dir, 'tuning.md')) as f:
                print(f.read())
        else:
            rank(args, grid)
            record(args, 'ranking', start)
            runs.run([sys.executable, 'tools/paper_tables/gen_tables.py',
                      '--seeds', args.work_dir, '--print'])
    print(f'this invocation: {(time.time() - start) / 60:.1f} minutes')
