"""Launch the runs a manifest's tables still miss, resumably.

    python tools/paper_tables/run.py [MANIFEST] [--work-root DIR]
        [--tables ID ...] [--runs ID ...] [--launcher local|dist|slurm]
        [--partition P] [--dry-run] [--plan [--gpus N] [--gpu NAME] [--mfu F]]
        [--page FILE]

Plans the selected runs (default: every run the selected tables use) and
their dependencies: finished runs are skipped (done marker / test
metrics.json), unfinished ones resume from their last checkpoint
(``--resume``), runs whose config is still pending are reported as blocked.
``local`` runs tools/train.py / tools/test.py here one after the other,
``dist`` runs tools/dist_train.sh / dist_test.sh with the run's ``gpus``;
``slurm`` only prints tools/slurm_train.sh lines (in dependency order; each
srun blocks, so the printed script can be submitted as is). ``--dry-run``
prints the plan. Run it again after an interruption: it continues.

``--dry-run --plan`` prices the selected tables instead
(mmpos.analysis.plan: one training step of each config's real model under
fake tensors): every run of a table with its per-GPU batch on ``--gpus``
GPUs of ``--gpu`` (the run's total batch kept), its peak memory and
whether it fits, and its GPU-hours at the MFU (assumed where not given),
then the table's total (its runs and the pretrainings they start from).
``--page FILE`` writes that for every table on 8x A100-80GB and 8x
H100-80GB as a Markdown page (docs/user_guides/paper_table_plans.md).
"""
import argparse
import dataclasses
import math
import os
import os.path as osp
import subprocess
import sys

from mmpos.guardrails.cli import cli_main
from mmpos_harness.paper_tables.commands import plan, select_runs, shell_line
from mmpos_harness.paper_tables.manifest import ManifestError, load_manifest

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('manifest', nargs='?',
                        default='tools/paper_tables/manifest.yaml')
    parser.add_argument('--work-root', default='work_dirs/paper_tables')
    parser.add_argument('--tables', nargs='+')
    parser.add_argument('--runs', nargs='+')
    parser.add_argument('--launcher', default='local',
                        choices=['local', 'dist', 'slurm'])
    parser.add_argument('--partition', default='PARTITION')
    parser.add_argument('--python', default=sys.executable)
    parser.add_argument('--dry-run', action='store_true')
    parser.add_argument('--plan', action='store_true',
                        help='with --dry-run: price the runs (memory fit, '
                        'GPU-hours) instead of printing their commands')
    parser.add_argument('--gpus', type=int, default=8)
    parser.add_argument('--gpu', default='a100-80gb')
    parser.add_argument('--mfu', type=float,
                        help='model FLOP utilisation (default: assumed)')
    parser.add_argument('--page', metavar='FILE',
                        help='write every table priced on 8x A100-80GB and '
                        '8x H100-80GB as Markdown')
    args = parser.parse_args(argv)
    from mmpos.analysis.plan import GPUS
    if args.plan and not args.dry_run:
        parser.error('--plan prices runs; it goes with --dry-run')
    if args.gpu not in GPUS:
        parser.error(f'--gpu {args.gpu!r}: choose from {sorted(GPUS)}')
    if args.gpus < 1:
        parser.error(f'--gpus must be >= 1, got {args.gpus}')
    if args.mfu is not None and not 0 < args.mfu <= 1:
        parser.error(f'--mfu must be in (0, 1], got {args.mfu}')
    return args


#: what each paper states about its compute (../shared/papers), by the
#: manifest's table id prefix; none states GPU-hours
PAPER_BUDGETS = {
    'cr2pq': 'CR2PQ (Platform): 32 V100 GPUs by default; no hours stated.',
    'droppos': 'DropPos (A.1, A.2): ViT-B pretrained on 64 2080Ti GPUs and '
    'fine-tuned on 32; ViT-L on 32 and 16 V100; COCO on 8 V100; no hours '
    'stated.',
    'icpf': 'ICPF (B.1): ViT-S on one node of 4 A6000 GPUs, ViT-B on two; '
    '1.3x the training time per epoch of their DINOv2; no hours stated.',
    'rope_vit': 'RoPE-ViT: no budget; RoPE adds a negligible cost to the '
    'network (Computation costs).',
    'qbheat': 'QB-Heat: no budget stated.',
}


#: the batch per GPU each config is planned at; :func:`price` scales its
#: peak to the run's batch (activations grow with it, the rest stays)
PLAN_BATCH = 8


@dataclasses.dataclass
class Priced:
    """One run priced on ``gpus`` GPUs of ``gpu``: ``plan`` at the per-GPU
    batch that keeps the run's total batch, its GPU-hours (None: test only
    or schedule unknown), or ``error`` where the config did not plan."""
    run: object
    plan: object = None
    hours: float = None
    error: str = ''


def price(manifest, runs, gpu, gpus, mfu=None, cache=None):
    """``{run id: Priced}`` for ``runs``. Each config is planned once, at
    :data:`PLAN_BATCH` images at most (``cache``: config path -> Plan or
    error text), with its own position
    scheme (a run's ``cfg_options`` change the schedule it is priced with,
    not the plan: a position scheme's cost is < 1 % of a ViT's); the
    per-GPU batch is the config's times ``run.gpus / gpus``, its peak the
    linear model of :func:`mmpos.analysis.plan.at_batch`."""
    from mmpos.analysis.plan import MFU, at_batch
    from mmpos.analysis.plan import plan as plan_config
    from mmpos.analysis.plan import schedule
    from mmpos.guardrails.launch import load_config
    cache = {} if cache is None else cache
    priced = {}
    for run in runs:
        if run.test_of:
            priced[run.id] = Priced(run)
            continue
        path = manifest.config_path(run.config)
        if path not in cache:
            try:
                cfg = load_config(path)
                cache[path] = plan_config(cfg, min(
                    PLAN_BATCH, cfg.train_dataloader.batch_size))
            except Exception as err:  # a planner failure is a table cell
                cache[path] = f'{type(err).__name__}: {err}'.splitlines()[0]
        found = cache[path]
        if isinstance(found, str):
            priced[run.id] = Priced(run, error=found)
            continue
        cfg = load_config(path, run.cfg_options or None)
        total = cfg.train_dataloader.batch_size * run.gpus
        batch = max(1, math.ceil(total / gpus))
        p = dataclasses.replace(at_batch(found, batch), **schedule(cfg))
        if p.max_iters is None and p.epochs and p.epoch_images:
            # the schedule's iterations at the run's total batch
            p = dataclasses.replace(p, max_iters=math.ceil(
                p.epoch_images / total) * p.epochs)
        iters = p.iterations(gpus)
        hours = None if iters is None else (
            p.flops_train * total * iters /
            (p.peak_tflops(gpu) * 1e12 * (mfu or MFU)) / 3600)
        priced[run.id] = Priced(run, p, hours)
    return priced


def table_runs(manifest, table):
    """The runs of ``table`` and those they start from."""
    ids = list(dict.fromkeys(r for row in table.rows
                             for r in row.runs.values()))
    return select_runs(manifest, ids)


def price_lines(manifest, tables, gpu, gpus, mfu=None, cache=None):
    """Text lines: every run of each table priced, the table's total."""
    from mmpos.analysis.plan import GPUS, MFU, MFU_RANGE
    used = (f'{mfu:g} (given)' if mfu else
            f'{MFU:g} (assumed; {MFU_RANGE[0]:g}-{MFU_RANGE[1]:g} is the '
            'usual range, no GPU measurement yet)')
    lines = [f'# {gpus} x {gpu} ({GPUS[gpu][0]:g} GiB), MFU {used}']
    for table in tables:
        runs = table_runs(manifest, table)
        priced = price(manifest, runs, gpu, gpus, mfu, cache)
        lines.append(f'{table.id}: {table.title}')
        for item in priced.values():
            lines.append('  ' + _cells(item, gpu, sep='  '))
        lines.append(f'  total: {_total(priced.values())}')
    return lines


def _cells(item, gpu, sep=' | '):
    run = item.run
    if run.test_of:
        return sep.join([run.id, 'test of ' + run.test_of, '', '', '', ''])
    if item.error:
        return sep.join([run.id, osp.basename(run.config),
                         'not planned: ' + item.error[:160], '', '', ''])
    p = item.plan
    peak = p.peak['Total'] / 2**30
    fits = 'fits' if p.fits(gpu) else 'DOES NOT FIT'
    hours = '?' if item.hours is None else f'{item.hours:,.0f}'
    return sep.join([run.id, osp.basename(run.config), f'{p.batch}/GPU',
                     f'{peak:.1f} GiB', fits, f'{hours} GPU-h'])


def _total(items) -> str:
    items = list(items)
    hours = sum(i.hours or 0 for i in items)
    unplanned = sum(1 for i in items if i.error or (
        i.plan is not None and i.hours is None))
    return (f'{hours:,.0f} GPU-h' +
            (f' + {unplanned} run(s) not priced' if unplanned else ''))


PAGE_HEAD = """# Planning a paper table

What each table of tools/paper_tables/manifest.yaml costs to train, before
a GPU is spent. Generated by

    python tools/paper_tables/run.py --dry-run --page \\
        docs/user_guides/paper_table_plans.md

from the planner (`mmpos.analysis.plan`, see
[Distributed training](distributed.md)): one training step of each
config's real model under fake tensors gives its FLOPs per image and its
peak memory per GPU (planned at 8 images per GPU or the config's batch if
smaller, the activations scaled to the run's batch); a run keeps its recipe's total batch on 8 GPUs (the
per-GPU batch is the config's times the run's GPUs / 8); GPU-hours are
FLOPs x images of the schedule at the model FLOP utilisation below, in the
step's precision (fp32 without TF32, or the config's AMP dtype). A table's
total counts its runs and the pretrainings they start from (a pretraining
shared by two tables is counted in both). Runs marked *not planned* are
ones whose step the planner cannot run yet (the reason is given); they are
left out of the totals.

**MFU: {mfu}.** This is an assumption: no GPU measurement of these configs
exists yet. At 30 % every number of GPU-hours here grows by a third, at
50 % it shrinks by a fifth.
"""


def page(manifest, tables, cache=None) -> str:
    """The Markdown page: every table on 8x A100-80GB and 8x H100-80GB
    beside what its paper states about its budget."""
    from mmpos.analysis.plan import MFU, MFU_RANGE
    out = [PAGE_HEAD.format(mfu=f'{MFU:g}, assumed ({MFU_RANGE[0]:g}-'
                            f'{MFU_RANGE[1]:g} is the usual range)')]
    gpus = ('a100-80gb', 'h100-80gb')
    cache = {} if cache is None else cache
    summary = ['## Totals', '',
               '| table | 8x A100-80GB | 8x H100-80GB | the paper states |',
               '| --- | --- | --- | --- |']
    sections = []
    for table in tables:
        runs = table_runs(manifest, table)
        by_gpu = [price(manifest, runs, g, 8, None, cache) for g in gpus]
        budget = next((v for k, v in PAPER_BUDGETS.items()
                       if table.id.startswith(k)), '')
        summary.append(f'| {table.id} | {_total(by_gpu[0].values())} | '
                       f'{_total(by_gpu[1].values())} | {budget} |')
        rows = [f'## {table.id}: {table.title}', '',
                f'{table.paper}, {table.source}. {budget}', '',
                '| run | config | batch | peak | A100-80GB | GPU-h A100 '
                '| H100-80GB | GPU-h H100 |',
                '| --- | --- | --- | --- | --- | --- | --- | --- |']
        for a100, h100 in zip(by_gpu[0].values(), by_gpu[1].values()):
            ca = _cells(a100, gpus[0]).split(' | ')
            ch = _cells(h100, gpus[1]).split(' | ')
            rows.append('| ' + ' | '.join(
                [f'`{ca[0]}`', f'`{ca[1]}`' if ca[1] else '', ca[2], ca[3],
                 ca[4], ca[5], ch[4], ch[5]]) + ' |')
        rows += ['', f'Total: {_total(by_gpu[0].values())} on A100-80GB, '
                 f'{_total(by_gpu[1].values())} on H100-80GB.', '']
        sections += rows
    notes = sorted({n for p in cache.values() if not isinstance(p, str)
                    for n in p.notes if 'stand-ins' not in n})
    return '\n'.join(out + summary + [''] + sections +
                      ['## What the plans assumed', ''] +
                      [f'- {n}' for n in notes]) + '\n'


@cli_main('run.py')
def main(argv=None):
    args = parse_args(argv)
    try:
        manifest = load_manifest(args.manifest)
        if args.runs:
            run_ids = args.runs
        else:
            tables = ([manifest.table(t) for t in args.tables]
                      if args.tables else manifest.tables)
            run_ids = list(dict.fromkeys(
                r for t in tables for row in t.rows for r in row.runs.values()))
        work_root = osp.abspath(args.work_root)
        steps = plan(manifest, run_ids, work_root, args.launcher,
                     args.python, args.partition)
    except (ManifestError, KeyError, ValueError) as err:
        sys.exit(f'run.py: error: {err}')
    if args.page or args.plan:
        tables = ([manifest.table(t) for t in args.tables]
                  if args.tables else manifest.tables)
        cache = {}
        if args.plan:
            print('\n'.join(price_lines(manifest, tables, args.gpu,
                                         args.gpus, args.mfu, cache)))
        if args.page:
            with open(args.page, 'w') as f:
                f.write(page(manifest, tables, cache))
        return
    todo = [s for s in steps if s.action in ('start', 'resume')]
    for step in steps:
        note = f' ({step.reason})' if step.reason else ''
        print(f'# {step.action:7s} {step.run.id}{note}', file=sys.stderr)
    if args.dry_run or args.launcher == 'slurm':
        for step in todo:
            print(shell_line(step, work_root))
        return
    for step in todo:
        os.makedirs(osp.join(work_root, step.run.id), exist_ok=True)
        line = shell_line(step, work_root)
        print(f'+ {line}', flush=True)
        if subprocess.run(line, shell=True, cwd=ROOT).returncode:
            sys.exit(f'run.py: {step.run.id} failed; fix it and run '
                     'run.py again (finished runs are skipped, this one '
                     'resumes)')
    blocked = sum(s.action == 'blocked' for s in steps)
    print(f'{len(todo)} run(s) launched, {blocked} blocked', file=sys.stderr)


if __name__ == '__main__':
    main()
