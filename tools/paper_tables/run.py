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
import re
import subprocess
import sys
import time

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


@dataclasses.dataclass(frozen=True)
class Budget:
    """What a paper states about its compute, with the section that states
    it: ``short`` for the totals, ``text`` for the table's section, and
    ``beside``, the numbers of ours that compare with one it states
    (:func:`beside`): ``('hours', run, other run, the paper's ratio of
    their time per epoch)`` or ``('flops', run, the paper's forward FLOPs
    per image)``."""
    short: str
    text: str
    beside: tuple = ()


#: the papers' budgets (../shared/papers) by the manifest's table id
#: prefix; none states GPU-hours or GPU-days
PAPER_BUDGETS = {
    'cr2pq': Budget(
        'CR2PQ §4: 32 V100 GPUs; no hours',
        'CR2PQ §4 (*Pre-training hyper-parameters*, *Platform*): batch '
        '2048 on 32 GPUs (64 per GPU), 32 V100 GPUs for every experiment '
        'unless stated; no GPU-hours or days stated.'),
    'droppos': Budget(
        'DropPos App. A: 64 2080Ti (ViT-B), 32 V100 (ViT-L), 8 V100 '
        '(COCO, ADE20k); no hours',
        'DropPos App. A.1-A.3: ViT-B pretrained on 64 2080Ti GPUs and '
        'fine-tuned on 32, ViT-L pretrained on 32 V100 GPUs and fine-tuned '
        'on 16; COCO (88,750 iterations at batch 16) and ADE20k (80k '
        'iterations at batch 16) on 8 V100 GPUs each; no GPU-hours or days '
        'stated (§5: "limited computational resources").'),
    'icpf': Budget(
        'ICPF App. B.1: 4 A6000 (ViT-S), 8 (ViT-B); an epoch 1.3x '
        "DINOv2's; no hours",
        'ICPF App. B.1: ViT-S pretrained on one node of 4 A6000 GPUs, ViT-B '
        'on two such nodes; an epoch takes 1.3x the time of their DINOv2 '
        'on one node; no GPU-hours or days stated.',
        (('hours', 'icpf_vit-b_100e', 'dinov2_vit-b_100e', 1.3),
         ('hours', 'icpf_vit-s_100e', 'dinov2_vit-s_100e', 1.3))),
    'rope_vit': Budget(
        'RoPE-ViT §3.3: no GPUs or hours; ViT-B 17.6 GFLOPs per image',
        'RoPE-ViT §3.3 (*Computation costs*): no GPUs, hours or days '
        "stated; RoPE's rotation adds 1.8M FLOPs to ViT-B's 17.6 GFLOPs "
        'per image (0.01 %).',
        (('flops', 'deit3_vit-b_ape', 17.6e9), )),
    'qbheat': Budget(
        'QB-Heat App. B.2: DETR probing on 8 GPUs; no hours',
        'QB-Heat App. B.1-B.2: pretraining at batch 1024 (Tab. 9; its '
        'epochs are not stated), COCO decoder probing 500 epochs on 8 GPUs '
        'at 2 images per GPU and 200 more epochs to fine-tune; no GPU-hours '
        'or days stated.'),
}


#: the batch per GPU each config is planned at; :func:`price` scales its
#: peak to the run's batch (activations grow with it, the rest stays)
PLAN_BATCH = 8
#: a plan whose activations and temporaries are under this fraction of its
#: peak holds no activations at its peak (the optimizer step's): it does
#: not scale to another batch
NO_ACTIVATIONS = 0.01


@dataclasses.dataclass
class Priced:
    """One run priced on ``gpus`` GPUs of ``gpu``: ``plan`` at the per-GPU
    batch that keeps the run's total batch, its GPU-hours (None: test only
    or schedule unknown), or ``error`` where the config did not plan;
    ``fsdp``: the run's config trains with FSDP (planned sharded on the
    run's GPUs)."""
    run: object
    plan: object = None
    hours: float = None
    error: str = ''
    fsdp: bool = False


def _portable(text: str) -> str:
    """``text`` without this checkout's and the environment's path prefixes
    (a page is the same wherever it is generated)."""
    text = text.replace(ROOT + os.sep, '')
    return re.sub(r'\S*site-packages' + re.escape(os.sep), '', text)


def _planned(cache, key, path, batch=None, world_size=1):
    """``cache[key]``, planned first if missing: the Plan of the config at
    ``path`` at ``batch`` images per GPU (None: :data:`PLAN_BATCH` or the
    config's batch if smaller) on ``world_size`` GPUs (an FSDP config's
    shards), or the error text; a config planned here prints its CPU time
    on stderr."""
    from mmpos.analysis.plan import plan as plan_config
    from mmpos.guardrails.launch import load_config
    if key not in cache:
        start = time.process_time()
        try:
            cfg = load_config(path)
            cache[key] = plan_config(cfg, batch or min(
                PLAN_BATCH, cfg.train_dataloader.batch_size),
                world_size=world_size)
        except Exception as err:  # a planner failure is a table cell
            cache[key] = _portable(
                f'{type(err).__name__}: {err}'.splitlines()[0])
        print(f'# planned {_portable(path)} at batch {batch or "default"}: '
              f'{time.process_time() - start:.0f} CPU s',
              file=sys.stderr, flush=True)
    return cache[key]


def price(manifest, runs, gpu, gpus, mfu=None, cache=None):
    """``{run id: Priced}`` for ``runs``. Each config is planned once, at
    :data:`PLAN_BATCH` images at most (``cache``: config path -> Plan or
    error text), with its own position scheme (a run's ``cfg_options``
    change the schedule it is priced with, not the plan: a position
    scheme's cost is < 1 % of a ViT's); the per-GPU batch is the config's
    times ``run.gpus / gpus``, its peak the linear model of
    :func:`mmpos.analysis.plan.at_batch`. Where the plan's peak holds no
    activations (:data:`NO_ACTIVATIONS`; the optimizer step's peak: a few
    tokens per image, as DropPos' encoder sees), that model cannot scale
    it: the config is planned again at the run's batch
    (``cache[(path, batch)]``). A config that trains with FSDP is planned
    sharded on ``gpus`` GPUs (``cache[(path, gpus)]``)."""
    from mmpos.analysis.plan import MFU, at_batch, schedule, trains_fsdp
    from mmpos.guardrails.launch import load_config
    cache = {} if cache is None else cache
    priced = {}
    for run in runs:
        if run.test_of:
            priced[run.id] = Priced(run)
            continue
        path = manifest.config_path(run.config)
        cfg = load_config(path, run.cfg_options or None)
        world = gpus if trains_fsdp(cfg) else 1
        found = _planned(cache, (path, gpus) if world > 1 else path, path,
                         world_size=world)
        if isinstance(found, str):
            priced[run.id] = Priced(run, error=found)
            continue
        total = cfg.train_dataloader.batch_size * run.gpus
        batch = max(1, math.ceil(total / gpus))
        if batch != found.batch and found.peak.get('ACT', 0) + found.peak.get(
                'TEMP', 0) < NO_ACTIVATIONS * found.peak['Total']:
            found = _planned(cache, (path, batch) + (world, ) * (world > 1),
                             path, batch, world)
            if isinstance(found, str):
                priced[run.id] = Priced(run, error=found)
                continue
        p = dataclasses.replace(at_batch(found, batch), **schedule(cfg))
        if p.max_iters is None and p.epochs and p.epoch_images:
            # the schedule's iterations at the run's total batch
            p = dataclasses.replace(p, max_iters=math.ceil(
                p.epoch_images / total) * p.epochs)
        iters = p.iterations(gpus)
        hours = None if iters is None else (
            p.flops_train * total * iters /
            (p.peak_tflops(gpu) * 1e12 * (mfu or MFU)) / 3600)
        priced[run.id] = Priced(run, p, hours, fsdp=world > 1)
    return priced


def fitting_batch(p, gpu: str) -> int:
    """The largest batch per GPU whose peak fits ``gpu``, by the linear
    model of :func:`mmpos.analysis.plan.at_batch` (the kinds of
    ``FIXED_KINDS`` stay, the others grow with the batch)."""
    from mmpos.analysis.plan import FIXED_KINDS, GPUS, RESERVED_GIB
    fixed = sum(v for k, v in p.peak.items() if k in FIXED_KINDS)
    per_image = (p.peak['Total'] - fixed) / p.batch
    free = (GPUS[gpu][0] - RESERVED_GIB) * 2**30
    return max(0, int((free - fixed) // per_image)) if per_image > 0 else 0


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
            lines.append('  ' + '  '.join(c for c in _cells(item, gpu) if c))
        lines.append(f'  total: {_total(priced.values())}')
    return lines


def _cells(item, gpu):
    """``[run, config, batch per GPU, peak, fit, GPU-hours]`` of a priced
    run."""
    run = item.run
    config = osp.basename(run.config)
    if run.test_of:
        return [run.id, config, '', '', 'test of ' + run.test_of, '']
    if item.error:
        return [run.id, config, '', '',
                'not planned: ' + item.error[:160].replace('|', '/'), '']
    p = item.plan
    fits = 'fits' if p.fits(gpu) else (
        f'DOES NOT FIT ({fitting_batch(p, gpu)}/GPU would)')
    if item.fsdp:
        fits += f' (FSDP, sharded on {p.world_size})'
    hours = '?' if item.hours is None else f'{item.hours:,.0f}'
    return [run.id, config, f'{p.batch}/GPU',
            f'{p.peak["Total"] / 2**30:.1f} GiB', fits, f'{hours} GPU-h']


def _total(items, spread=None) -> str:
    """The GPU-hours of ``items`` and how many are not priced; ``spread``:
    ``(low, high)`` factors of the hours also shown as a range."""
    items = list(items)
    hours = sum(i.hours or 0 for i in items)
    unplanned = sum(1 for i in items if i.error or (
        i.plan is not None and i.hours is None))
    text = f'{hours:,.0f} GPU-h'
    if spread:
        text += f' ({hours * spread[0]:,.0f}-{hours * spread[1]:,.0f})'
    return text + (f' + {unplanned} run(s) not priced' if unplanned else '')


def beside(budget: Budget, priced) -> str:
    """Ours beside the numbers ``budget`` states, from ``priced`` (run id
    -> :class:`Priced`); '' where none of them is priced."""
    out = []
    for kind, run, *rest in budget.beside:
        item = priced.get(run)
        if item is None or item.plan is None:
            continue
        if kind == 'hours':
            other = priced.get(rest[0])
            if other is None or not (item.hours and other.hours and
                                     item.plan.epochs and other.plan.epochs):
                continue
            ratio = (item.hours / item.plan.epochs) / (other.hours /
                                                       other.plan.epochs)
            out.append(f'an epoch of `{run}` takes {ratio:.2f}x the FLOPs '
                       f'of one of `{rest[0]}` (the paper: {rest[1]:g}x the '
                       'time)')
        else:
            fwd = item.plan.flops_fwd
            out.append(f'the forward of `{run}` (224 px) is {fwd / 1e9:.1f} '
                       "GFLOPs per image by torch's count, which counts a "
                       f'multiply-add as 2 FLOPs: {fwd / 2e9:.1f} G '
                       f'multiply-adds (the paper: {rest[0] / 1e9:g} G)')
    return 'Ours, planned: ' + '; '.join(out) + '.' if out else ''


PAGE_HEAD = """# Planning a paper table

What each table of `tools/paper_tables/manifest.yaml` costs to train,
before a GPU is spent: every run of a table with its memory per GPU,
whether it fits, and its GPU-hours, on 8x A100-80GB and 8x H100-80GB,
beside the compute its paper states. Generated by

    python tools/paper_tables/run.py --dry-run --page \\
        docs/user_guides/paper_table_plans.md

(`--dry-run --plan --gpus N --gpu NAME [--mfu F]` prints the same for
other GPUs) from the planner, `mmpos.analysis.plan` (see
[Distributed training](distributed.md)): one training step of each
config's real model under fake tensors gives its FLOPs per image and its
peak memory per GPU. Each config is planned once, at 8 images per GPU or
its own batch if smaller, with the activations scaled to the run's batch
(parameters, gradients and optimizer state stay); where that plan's peak
holds no activations (the optimizer step's peak, as in DropPos, whose
encoder sees a quarter of the patches), the config is planned again at the
run's batch. A run keeps its recipe's
total batch on 8 GPUs (the per-GPU batch is the config's times the run's
GPUs / 8). A run that does not fit at that batch says which batch per GPU
would: it keeps its total batch with gradient accumulation (mmengine's
`accumulative_counts`) and its GPU-hours. GPU-hours are the training
FLOPs of the schedule's images at the model FLOP utilisation below, in the
step's precision (fp32 without TF32, or the config's AMP dtype);
validation, checkpoints, data loading and communication are not counted,
nor test-only runs (*test of*). A detector's plan is an upper bound on
its heads' work: every anchor and proposal is kept and the RoI sampler
takes its most positives (the notes under *The plans* say where the
planner answered for tensor values). A table's total counts its runs and the
pretrainings they start from (a pretraining shared by two tables is
counted in both). Runs marked *not planned* are ones whose step the
planner cannot run (the reason is given); they are left out of the
totals.

**MFU {mfu:g}, assumed.** No GPU measurement of these configs exists yet
(`benchmarks/gpu_check.sh` measures it); {mfu_low:g}-{mfu_high:g} is the
usual range, so the totals also give the hours at {mfu_high:g} and
{mfu_low:g} (x{low:.2f} and x{high:.2f}). The configs train in fp32
unless launched with `--amp`: under AMP the same FLOPs run at the bf16 /
fp16 peak (312 instead of 19.5 TFLOP/s on an A100, 989 instead of 67 on
an H100), about 16x and 15x fewer GPU-hours at the same MFU.

**FSDP.** A run whose config trains with FSDP (`configs/_base_/fsdp.py`)
is planned per GPU of its GPUs: the config's units sharded by FSDP2's
`fully_shard` on a fake process group and tracked by PyTorch's
`FSDPMemTracker` (`torch.distributed._tools`), so each GPU holds its
share of the parameters, gradients and optimizer state, plus the units
gathered while they run (`mmpos/analysis/plan.py`). The configs wrap with
FSDP1 through mmengine's `FlexibleRunner`, which gathers and frees the
same units; its padding and prefetch order are FSDP2's in the plan. The
other runs are planned as under DDP. {fsdp}
"""


def page(manifest, tables, cache=None) -> str:
    """The Markdown page: every table on 8x A100-80GB and 8x H100-80GB
    beside what its paper states about its budget (:data:`PAPER_BUDGETS`),
    then what each config's plan found."""
    from mmpos.analysis.plan import MFU, MFU_RANGE
    spread = (MFU / MFU_RANGE[1], MFU / MFU_RANGE[0])
    gpus = ('a100-80gb', 'h100-80gb')
    cache = {} if cache is None else cache
    summary = ['## Totals', '',
               f'GPU-hours at MFU {MFU:g} (at {MFU_RANGE[1]:g}-'
               f'{MFU_RANGE[0]:g} in brackets).', '',
               '| table | 8x A100-80GB | 8x H100-80GB | the paper states |',
               '| --- | --- | --- | --- |']
    sections, every, fsdp = [], [{}, {}], []
    for table in tables:
        runs = table_runs(manifest, table)
        by_gpu = [price(manifest, runs, g, 8, None, cache) for g in gpus]
        for seen, priced in zip(every, by_gpu):
            seen.update(priced)
        budget = next((v for k, v in PAPER_BUDGETS.items()
                       if table.id.startswith(k)), None)
        summary.append(' | '.join(
            [f'| {table.id}'] +
            ([_total(p.values(), spread) for p in by_gpu] if runs else
             ['no run of ours'] * 2) +
            [f'{budget.short if budget else "nothing"} |']))
        rows = [f'## {table.id}: {table.title}', '',
                f'{table.paper}, {table.source}.', '']
        if budget:
            rows += [f'The paper states: {budget.text} '
                     f'{beside(budget, by_gpu[0])}'.rstrip(), '']
        sharded = [i.run.id for i in by_gpu[0].values() if i.fsdp]
        fsdp += sharded
        if sharded:
            rows += [f'FSDP runs, planned sharded (see *FSDP* above): '
                     f'{", ".join(sharded)}.', '']
        trained = [(a100, h100) for a100, h100 in zip(
            by_gpu[0].values(), by_gpu[1].values()) if not a100.run.test_of]
        if not runs:
            sections += rows + ['No run of ours: the paper\'s numbers only.',
                                '']
            continue
        rows += ['| run | config | batch | peak | A100-80GB | GPU-h A100 '
                 '| H100-80GB | GPU-h H100 |',
                 '| --- | --- | --- | --- | --- | --- | --- | --- |']
        for a100, h100 in trained:
            ca, ch = _cells(a100, gpus[0]), _cells(h100, gpus[1])
            rows.append('| ' + ' | '.join(
                [f'`{ca[0]}`', f'`{ca[1]}`', ca[2], ca[3], ca[4], ca[5],
                 ch[4], ch[5]]) + ' |')
        tests = {}
        for run in runs:
            if run.test_of:
                tests.setdefault(run.test_of, []).append(run.id)
        if tests:
            rows += ['', 'Not priced (test only): ' + '; '.join(
                f'{len(ids)} evaluation(s) of `{of}`'
                for of, ids in tests.items()) + '.']
        rows += ['', f'Total: {_total(by_gpu[0].values())} on 8x A100-80GB, '
                 f'{_total(by_gpu[1].values())} on 8x H100-80GB.', '']
        sections += rows
    summary += [f'| all tables, each run once | '
                f'{_total(every[0].values(), spread)} | '
                f'{_total(every[1].values(), spread)} | |', '']
    head = PAGE_HEAD.format(
        mfu=MFU, mfu_low=MFU_RANGE[0], mfu_high=MFU_RANGE[1],
        low=spread[0], high=spread[1],
        fsdp=(f'FSDP runs here: {", ".join(sorted(set(fsdp)))}.' if fsdp
              else 'No run of these tables trains with FSDP (the ViT-L '
              'FSDP variants of DropPos and ICPF are not in the manifest).'))
    return '\n'.join([head] + summary + sections + _plans(cache)) + '\n'


def _plans(cache) -> list:
    """Markdown lines: each planned config's plan, the notes common to all
    once."""
    from mmpos.analysis.plan import RESERVED_GIB
    common = (f'; no FSDP sharding, no communication; {RESERVED_GIB:g} GiB '
              'of a GPU kept free for the CUDA context and the caching '
              'allocator')
    lines = ['## The plans', '',
             'Each config planned at the batch per GPU given (fp32 unless '
             'AMP; a second row: planned again at a run\'s batch, its first '
             f'plan\'s peak holding no activations); {common[2:]}.', '',
             '| config | batch | parameters | forward GFLOPs / image | '
             'training GFLOPs / image | notes |',
             '| --- | --- | --- | --- | --- | --- |']
    for key, p in sorted(cache.items(), key=lambda item: str(item[0])):
        name = f'`{osp.basename(key if isinstance(key, str) else key[0])}`'
        if isinstance(p, str):
            lines.append(f'| {name} | | | | | not planned: '
                         f'{p.replace("|", "/")} |')
            continue
        notes = '; '.join(_portable(n.replace(common, '')) for n in p.notes)
        lines.append(f'| {name} | {p.batch} | {p.params / 1e6:.1f} M | '
                     f'{p.flops_fwd / 1e9:.1f} | {p.flops_train / 1e9:.1f} '
                     f'| {notes.replace("|", "/")} |')
    return lines


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
