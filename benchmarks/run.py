"""Run every benchmark the method issues ask for and write one summary.

Each benchmark is a sibling script (also runnable on its own) measuring
ours and a baseline in this process on the same input; the summary lists,
per comparison, both times, both peak memories (where measured), images/s,
and the ratios ours / baseline. The timing and memory protocol is
``_timing.py``'s (interleaved median; allocator-level peak memory; the C
allocator keeps freed memory, ``--malloc reuse``, unless ``--malloc
system``).

====================  =====================================================
``droppos``           DropPos vs mmpretrain ``MAE`` train step
``qbheat``            QB-Heat vs MAE-style full-image Mobile-Former step
``cr2pq``             CR2PQ vs mmpretrain ``MoCoV3`` (two-view EMA) step
``icpf``              ICPF vs the DINOv2 base without the extension
``rope_vit``          RoPE ViT vs mmpretrain ``VisionTransformer`` step
``sdpa``              torch SDPA vs naive attention
``pipeline``          multi-view pipelines with boxes vs ``MultiView``
``rope_scaling``      RoPE ViT forward at 224...1024 px, exponent, tables
``coord_aug``         DINOv3 coordinate augmentation vs none, RoPE ViT step
``online_probe``      pretraining step with vs without the online kNN probe
``vitdet_window``     ViTDet window attention (+ checkpointing) vs global
``rope_fast``         RoPE attention / ViT-S step, phasor and cos-sin paths
``checkpointing``     RoPE ViT-B step with vs without ``with_cp``
``position_schemes``  attention layer per position scheme vs none
``rope_compile``      ViT-S 224 px inference per scheme, eager and compiled
====================  =====================================================

Every time ratio carries its 95 % interval (``_timing.ratio``: paired t on
the per-round log times). The rows whose target bounds the time are one
family: their tests against the bound are adjusted by Holm
(:func:`judge_targets`) and each gets a verdict, ``met``, ``missed`` or
``no verdict``.

Writes ``<out>/<name>.json`` (settings, every row, each benchmark's full
result, its wall time, or its error) and ``<out>/<name>.md``; ``name``
defaults to ``<device>_quick`` / ``<device>_full``. A benchmark that fails
is recorded with its error and the others still run; the exit status is 1
then. The device is detected (``--device auto``: CUDA when available), and
on CUDA the models run under autocast (``--amp auto``: bf16, fp16 where bf16
is unsupported). Both files are written atomically; a second ``run.py`` on
the same ``--out`` folder is refused while one runs
(:func:`mmpos.guardrails.launch.work_dir_lock`).

    python benchmarks/run.py [--quick] [--out DIR] [--name NAME]
        [--only NAME ...] [--device auto|cpu|cuda] [--amp auto|off|bf16|fp16]
        [--threads N] [--iters N] [--warmup N] [--malloc reuse|system]
        [--parts PART ...] [--models NAME ...] [--batch-size N]
        [--design designs/benchmarks/<benchmark>.yaml]

Replicates of one command, as a committed design fixes them (at least 10
processes in a shuffled order, spread over time): ``replicates.py``.
"""
import argparse
import ast
import importlib
import inspect
import json
import math
import os.path as osp
import platform
import sys
import time

import _timing

import mmpos_stats as stats
from mmpos.checkpoint import write_atomically
from mmpos.guardrails.cli import cli_main
from mmpos.guardrails.launch import work_dir_lock
from mmpos_harness import provenance

BENCHMARKS = {
    'droppos': 'droppos_step',
    'qbheat': 'qbheat_step',
    'cr2pq': 'cr2pq_step',
    'icpf': 'icpf_step',
    'rope_vit': 'rope_overhead',
    'sdpa': 'sdpa_attention',
    'pipeline': 'pipeline_throughput',
    'rope_scaling': 'rope_scaling',
    'coord_aug': 'rope_coord_aug',
    'online_probe': 'online_probe_overhead',
    'vitdet_window': 'vitdet_window',
    'rope_fast': 'rope_fast',
    'checkpointing': 'checkpointing',
    'position_schemes': 'position_schemes',
    'rope_compile': 'rope_compile',
}
ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
DEFAULT_OUT = osp.join(ROOT, 'benchmarks', 'results')
# what every benchmark's numbers go through beside its own module (the
# intervals and verdicts: mmpos_stats)
CODE = ('benchmarks/_timing.py', 'benchmarks/run.py', 'mmpos/models',
        'mmpos/datasets', 'mmpos/engine', 'mmpos_stats')


def depends(names) -> list:
    """The paths the benchmarks ``names`` measure (their modules, those
    they import from this folder, and :data:`CODE`): a change to one makes
    the stored result stale (``tests/test_results.py``)."""
    here = osp.dirname(osp.abspath(__file__))
    found, todo = set(), [BENCHMARKS[name] for name in names]
    while todo:
        module = todo.pop()
        path = f'benchmarks/{module}.py'
        if path in found:
            continue
        found.add(path)
        with open(osp.join(here, module + '.py')) as f:
            tree = ast.parse(f.read())
        todo += [name for node in ast.walk(tree)
                 for name in _imported(node)
                 if osp.isfile(osp.join(here, name + '.py'))]
    return sorted(found | set(CODE))


def _imported(node) -> list:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return [node.module]
    return []


def run_one(module_name: str, options: dict) -> dict:
    """Run one benchmark module with the ``options`` its ``run`` accepts;
    returns ``{seconds, result, rows[, markdown]}``."""
    module = importlib.import_module(module_name)
    accepted = inspect.signature(module.run).parameters
    start = time.perf_counter()
    result = module.run(**{k: v for k, v in options.items() if k in accepted})
    entry = dict(seconds=time.perf_counter() - start, result=result,
                 rows=module.summarize(result))
    if hasattr(module, 'markdown'):
        entry['markdown'] = module.markdown(result)
    return entry


def run_all(names, options: dict, log=print) -> dict:
    """``{name: run_one(...) or {seconds, error}}`` for the chosen names."""
    entries = {}
    for name in names:
        log(f'[{name}] {BENCHMARKS[name]}.py ...')
        start = time.perf_counter()
        try:
            entries[name] = run_one(BENCHMARKS[name], options)
        except Exception as exc:  # recorded; the other benchmarks still run
            entries[name] = dict(seconds=time.perf_counter() - start,
                                 error=f'{type(exc).__name__}: {exc}')
            log(f'[{name}] FAILED: {entries[name]["error"]}')
            continue
        log(f'[{name}] done in {entries[name]["seconds"]:.1f} s')
    return entries


def _json_safe(obj):
    """Non-finite floats become ``None`` (strict JSON)."""
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _fmt(value, digits: int = 1) -> str:
    if value is None or value == '':
        return '-'
    if isinstance(value, float):
        return f'{value:.{digits}f}'
    return str(value)


ROW_COLUMNS = (
    ('benchmark', 'benchmark', None), ('ours', 'ours', None),
    ('baseline', 'baseline', None), ('ours ms', 'ours_ms', 1),
    ('baseline ms', 'baseline_ms', 1), ('time x [95% CI]', 'time_ratio', 3),
    ('ours MiB', 'ours_peak_mib', 1), ('baseline MiB', 'baseline_peak_mib', 1),
    ('mem x', 'mem_ratio', 3), ('ours img/s', 'ours_images_per_s', 1),
    ('baseline img/s', 'baseline_images_per_s', 1), ('target', 'target', None),
    ('verdict (Holm p)', 'target_test', None))
VERDICTS = {'lower': 'met', 'higher': 'missed'}


def judge_targets(rows: list) -> None:
    """Adjust the rows' ``target_test`` (``_timing.comparison``: the log
    time ratio against the log bound) as one family by Holm and add
    ``target_verdict``: ``met`` (the ratio is below the bound at adjusted
    p < 0.05), ``missed`` (above), ``no verdict`` or ``no test`` (fewer
    than 2 rounds)."""
    judged = [row for row in rows if row.get('target_test')]
    tests = stats.family([stats.Comparison.from_dict(row['target_test'])
                          for row in judged], stats.HOLM)
    for row, test in zip(judged, tests):
        row['target_test'] = test.asdict()
        row['target_verdict'] = VERDICTS.get(test.verdict, test.verdict)


def _cell(row: dict, key: str, digits) -> str:
    if key == 'time_ratio' and key in row:
        return _timing.format_ratio(row)
    if key == 'target_test':
        test = row.get(key)
        if not test:
            return '-'
        p = '' if test['p_adj'] is None else f" ({test['p_adj']:.2g})"
        return row['target_verdict'] + p
    return _fmt(row.get(key), digits)


def summary_markdown(summary: dict) -> str:
    """The Markdown page of a :func:`write_summary` summary."""
    s = summary['settings']
    p = s['provenance']
    lines = [
        '# Benchmark summary', '',
        f"`{p['command']}` at commit {p['commit'][:10]} on {s['device']} "
        f"({p['machine']}), torch threads: {s['threads']}, autocast "
        f"{s['amp']}, {p['date']}. Load average (1/5/15 min) "
        f"{s['load_start']} at the start, {s['load_end']} at the end; "
        f"{s['total_s']:.0f} s in all.", '',
        'Ratios are ours / baseline, both measured in this process on the '
        'same input (time x < 1: ours is faster; mem x < 1: ours needs less '
        'memory). Times are medians of interleaved calls; a time ratio is '
        'the geometric mean of the per-round ratios with its 95 % interval '
        '(paired t on the log times; [-]: fewer than 2 rounds). A target '
        'that bounds the time is tested against it, the run\'s targets '
        'adjusted together (Holm): met, missed or no verdict. Memory is the '
        'peak allocated during one call above what existed before it (CPU: '
        'torch profiler allocator events; CUDA: max_memory_allocated); '
        'images/s = batch / median time. C allocator: '
        f"{s['malloc']} (reuse: freed memory is kept for the "
        'next step; system: glibc\'s defaults). See benchmarks/README.md.',
        '',
        '| ' + ' | '.join(c[0] for c in ROW_COLUMNS) + ' |',
        '|' + '---|' * len(ROW_COLUMNS)
    ]
    for row in summary['rows']:
        lines.append('| ' + ' | '.join(
            _cell(row, key, digits) for _, key, digits in ROW_COLUMNS) +
                     ' |')
    for name, entry in summary['benchmarks'].items():
        if entry.get('markdown'):
            lines += ['', f'## {name}', '', entry['markdown']]
    errors = {n: e['error'] for n, e in summary['benchmarks'].items()
              if 'error' in e}
    if errors:
        lines += ['', '## Failed', '']
        lines += [f'- `{name}`: {error}' for name, error in errors.items()]
    lines += ['', '## Wall time per benchmark', '']
    lines += [f"- `{name}`: {entry['seconds']:.1f} s"
              for name, entry in summary['benchmarks'].items()]
    return '\n'.join(lines) + '\n'


def write_summary(entries: dict, settings: dict, out_dir: str,
                  name: str) -> dict:
    """Write ``<out_dir>/<name>.json`` and ``.md`` (atomically); returns
    the summary (``{'settings', 'rows', 'benchmarks'}``)."""
    rows = [row for entry in entries.values() for row in entry.get('rows', [])]
    judge_targets(rows)
    summary = dict(settings=settings, rows=rows, benchmarks=entries)
    summary = _json_safe(summary)
    base = osp.join(out_dir, name)
    write_atomically(json.dumps(summary, indent=1).encode(), base + '.json')
    write_atomically(summary_markdown(summary).encode(), base + '.md')
    return summary


@cli_main('run.py')
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true',
                        help='tiny sizes (a few minutes on a 2-core CPU)')
    parser.add_argument('--out', default=DEFAULT_OUT,
                        help='output folder (default: benchmarks/results)')
    parser.add_argument('--name', help='file stem (default: '
                        '<device>_quick or <device>_full)')
    parser.add_argument('--only', nargs='+', choices=list(BENCHMARKS),
                        default=list(BENCHMARKS), metavar='NAME',
                        help=f'subset of {", ".join(BENCHMARKS)}')
    parser.add_argument('--parts', nargs='+', metavar='PART',
                        help='rope_fast only: its comparisons (rotation, '
                        'attention, vit_step; default all)')
    parser.add_argument('--models', nargs='+', metavar='NAME',
                        help='subset of the models of the benchmarks whose '
                        '`run` takes `models` (vitdet_window: one pair of a '
                        'row, e.g. global windowed)')
    parser.add_argument('--batch-size', type=int,
                        help='the batch of the benchmarks whose `run` takes '
                        '`batch_size` (default: each one\'s)')
    parser.add_argument('--design', metavar='YAML',
                        help='the benchmark design this run is a replicate '
                        'of (benchmarks/replicates.py passes it): recorded '
                        'in the settings and the provenance\'s depends')
    _timing.add_common_args(parser)
    args = _timing.parse_args(parser, argv)
    try:
        device, amp = _timing.setup(args.device, args.amp, args.threads)
    except (ValueError, RuntimeError) as exc:
        parser.error(str(exc))
    name = args.name or f"{device.type}_{'quick' if args.quick else 'full'}"
    argv = list(sys.argv[1:] if argv is None else argv)
    settings = dict(_timing.settings(device, amp), argv=argv,
                    quick=args.quick, python=platform.python_version(),
                    load_start=_timing.load())
    options = dict(quick=args.quick, iters=args.iters, warmup=args.warmup,
                   device=str(device), amp=args.amp)
    if args.parts:
        options['parts'] = args.parts
    if args.models:
        options['models'] = tuple(args.models)
    if args.batch_size:
        options['batch_size'] = args.batch_size
    if args.design:
        settings['design'] = osp.relpath(osp.abspath(args.design), ROOT)
        if settings['design'].startswith('..') or not osp.isfile(
                args.design):
            parser.error(f'--design {args.design}: not a file of this '
                         'repository')
    start = time.perf_counter()
    # one benchmark run per --out folder at a time (they would time each
    # other); results already there stay
    with work_dir_lock(args.out, keep_output=lambda: True,
                       option='--out'):
        entries = run_all(args.only, options)
        settings.update(load_end=_timing.load(),
                        total_s=time.perf_counter() - start)
        settings['provenance'] = provenance.record(
            ' '.join(['python', 'benchmarks/run.py', *argv]),
            depends(args.only) + ([settings['design']] if args.design
                                  else []))
        write_summary(entries, settings, args.out, name)
    print(f'wrote {osp.join(args.out, name)}.json and .md')
    failed = [n for n, e in entries.items() if 'error' in e]
    if failed:
        print(f'failed: {", ".join(failed)}', file=sys.stderr)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
