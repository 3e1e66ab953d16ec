"""RoPE attention on whatever device is present (CUDA when available).

Imports the torch-only position schemes (:mod:`mmpos_positions`, from the
repository), so that it runs where only torch is installed (e.g. a GPU
machine without the OpenMMLab stack).

* Checks on the device, per autocast dtype: q.k logits between patch tokens
  are unchanged by a common shift of all coordinates (integer and
  fractional), axial and mixed; outputs finite.
* Measures one attention layer (qkv -> the scheme's table ``.rotate`` on
  q and k -> SDPA, with the table's bias as its mask -> proj; one block,
  ``depth=1``) per position scheme: ``none`` (no positions) and every
  scheme of :data:`mmpos_positions.SCHEMES` (ComRoPE LD and LieRE with 8x8
  blocks, LookHere LH-180), with default constructor arguments. Width: ViT-B (dim 768, 12 heads); ``--quick`` on CPU: dim 128,
  2 heads. For each case (autocast dtype x mode x token count), every
  scheme's

  - training step (forward + backward of ``out.float().sum()``, train
    mode; gradients released after each step): median ms;
  - inference forward (``torch.no_grad``, eval mode: the grid's tables
    cached in eager mode, :class:`~mmpos_positions.CachedTables`):
    images/s;
  - peak memory each call adds (``_timing.peak_memory``: CUDA
    ``max_memory_allocated``, CPU profiler allocator events),

  and each ratio against ``none`` measured in the same case (steps of all
  schemes interleaved, ``_timing.measure``).
* Modes: ``eager`` and ``compiled`` (``torch.compile(layer, fullgraph=True,
  dynamic=False)``, inductor; dynamo reset before each case, the recompile
  limit raised so that no call falls back to eager). The first train and
  first eval call of each compiled layer is timed apart (``compile_s``) and
  a scheme that fails to compile is recorded with its error. To bound
  compile time only the first token count is compiled unless
  ``--compile-all-tokens`` (recorded as ``compiled_tokens``).
* Sizes: tokens 196 (14x14, ViT-B/16 at 224 px) and 1024 (32x32), batch 64
  on CUDA (2 on CPU), 20 timed rounds after 5 warmup calls; ``--quick``: 3
  rounds after 1 (CUDA: 196 tokens only; CPU: 16 and 64 tokens, batch 1,
  the tiny width).

Output: the JSON report on stdout (progress on stderr) and, with ``--out
DIR``, ``DIR/<device>_rope_attention.json`` (``settings`` + ``rows``, the
layout of ``benchmarks/run.py`` summaries, plus the shift check) and
``DIR/<device>_rope_attention.md``, both rewritten atomically after every
completed case, so a run stopped by a timeout keeps what it measured.
``<device>``: ``torch.cuda.get_device_name`` as a slug (``h100_80gb_hbm3``)
or ``cpu``.

Timing and device/AMP selection come from the sibling ``_timing.py`` (torch
only), the schemes from the torch-only package ``mmpos_positions``: on a
machine without the project installed, run it from the repository with
``PYTHONPATH=.`` (or ``pip install --no-deps -e .``).

    PYTHONPATH=. python benchmarks/rope_attention_device.py [--quick] [--device auto]
        [--amp auto|off|bf16|fp16 ...] [--modes eager compiled]
        [--schemes none axial mixed ...]
        [--iters 20] [--warmup 5] [--compile-all-tokens] [--out DIR]
        [--provenance RECORD.json]

``--provenance``: a record written in the repository, where git is
(``mmpos_harness.provenance.record``: command, commit, uncommitted
changes, depends), for a device machine that has none; the run stores it
under ``settings.provenance`` with its own machine, date and load.

``--amp`` takes several values, measured one after the other in one run
(``--amp bf16 off``: bf16 autocast and fp32); ``auto`` is bf16 on CUDA and
fp32 on CPU.
"""
import argparse
import datetime
import json
import os
import re
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

import _timing

import mmpos_positions  # torch only: `pip install --no-deps -e .` or PYTHONPATH=.

#: ``none`` and every registered scheme
SCHEMES = ('none', *mmpos_positions.SCHEMES)
MODES = ('eager', 'compiled')


def scheme_classes():
    """``{scheme: class}`` of the schemes measured (``none``: ``None``)."""
    return dict(none=None, **mmpos_positions.SCHEMES)


def scheme(classes, rope_type, head_dim, heads):
    """A one-block scheme with its default arguments (``None`` for
    ``'none'``)."""
    cls = classes[rope_type]
    return None if cls is None else cls(head_dim, heads, 1)


class Attention(nn.Module):
    """Minimal multi-head attention with optional 2-D positions on patch
    tokens."""

    def __init__(self, classes, dim, heads, rope_type):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.rope = scheme(classes, rope_type, dim // heads, heads)
        self.tables = mmpos_positions.CachedTables()  # eval: one per grid

    def forward(self, x, hw):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads)
        qkv = qkv.permute(2, 0, 3, 1, 4)
        qk, v = qkv[:2], qkv[2]  # q and k rotated in one call, no copy
        bias = None
        if self.rope is not None:  # the table, as a backbone computes it
            table = self.tables(self.rope, None, hw, B, device=x.device)[0]
            if isinstance(table, mmpos_positions.TokenTable):  # PaPE
                table = table.bind(x)
            qk, bias = table.rotate(qk), table.attn_bias  # LookHere, PaPE
        q, k = qk.unbind(0)
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=None if bias is None else bias.to(q.dtype))
        return self.proj(out.transpose(1, 2).reshape(B, N, C))


def check_shift_invariance(classes, device, dtype):
    torch.manual_seed(0)
    results = {}
    for rope_type in ('axial', 'mixed'):
        table = scheme(classes, rope_type, 64, 4).to(device).block_table

        def rope(x, coords):
            return table(0, coords[None]).rotate(x)

        q = torch.randn(2, 4, 50, 64, device=device)
        k = torch.randn(2, 4, 50, 64, device=device)
        coords = torch.rand(50, 2, device=device) * 14
        worst = 0.
        for shift in ((3., -2.), (0.37, -1.5)):
            shifted = coords + torch.tensor(shift, device=device)
            with _timing.autocast(device, dtype):
                a = rope(torch.stack((q, k)), coords=coords)
                b = rope(torch.stack((q, k)), coords=shifted)
            la = (a[0].float() @ a[1].float().transpose(-1, -2))
            lb = (b[0].float() @ b[1].float().transpose(-1, -2))
            assert torch.isfinite(la).all() and torch.isfinite(lb).all()
            worst = max(worst, ((la - lb).abs().max() /
                                la.abs().max()).item())
        results[rope_type] = worst
    return results


def _reset_dynamo():
    """Fresh dynamo caches and a recompile limit that one case (train and
    eval graph of every scheme, all from ``Attention.forward``) stays
    under, with failure instead of a silent eager fallback past it."""
    torch._dynamo.reset()
    config = torch._dynamo.config
    for name in ('cache_size_limit', 'recompile_limit'):
        if hasattr(config, name):
            setattr(config, name, 64)
    if hasattr(config, 'accumulated_cache_size_limit'):
        config.accumulated_cache_size_limit = max(
            config.accumulated_cache_size_limit, 256)
    if hasattr(config, 'fail_on_recompile_limit_hit'):
        config.fail_on_recompile_limit_hit = True


def measure_case(classes, schemes, device, dtype, mode, grid, batch, dim,
                 heads, iters, warmup):
    """``{scheme: stats}`` of one case (see the module docstring): train
    ``step_ms`` / ``peak_mib``, inference ``images_per_s`` / ``peak_mib``,
    compile seconds; a scheme that fails is ``{'error': ...}``."""
    hw = (grid, grid)
    torch.manual_seed(0)
    x = torch.randn(batch, grid * grid, dim, device=device,
                    requires_grad=True)
    x_eval = x.detach()
    if mode == 'compiled':
        _reset_dynamo()
    train, infer, out = {}, {}, {}
    for name in schemes:
        torch.manual_seed(0)  # equal qkv / proj weights for every scheme
        layer = Attention(classes, dim, heads, name).to(device)
        call = (torch.compile(layer, fullgraph=True, dynamic=False)
                if mode == 'compiled' else layer)

        def train_step(layer=layer, call=call):
            layer.train()
            with _timing.autocast(device, dtype):
                y = call(x, hw)
            y.float().sum().backward()
            layer.zero_grad(set_to_none=True)
            x.grad = None

        def infer_step(layer=layer, call=call):
            layer.eval()
            with torch.no_grad(), _timing.autocast(device, dtype):
                call(x_eval, hw)

        try:  # first calls apart: compilation (eager: tables, caches)
            entry = {}
            for key, step in (('train', train_step), ('infer', infer_step)):
                _timing.synchronize(device)
                start = time.perf_counter()
                step()
                _timing.synchronize(device)
                entry[f'{key}_first_call_s'] = time.perf_counter() - start
            if mode == 'compiled':
                entry['compile_s'] = (entry['train_first_call_s'] +
                                      entry['infer_first_call_s'])
        except Exception as exc:  # noqa: BLE001 -- recorded, run goes on
            out[name] = dict(error=f'{type(exc).__name__}: '
                             f'{str(exc).splitlines()[0][:300]}')
            print(traceback.format_exc(limit=3), file=sys.stderr)
            continue
        out[name] = entry
        train[name], infer[name] = train_step, infer_step
    if train:
        stats = _timing.measure(train, device, warmup, iters, memory=True)
        for name, s in stats.items():
            out[name].update(train_ms=s['step_ms'],
                             train_times_ms=s['times_ms'],
                             train_peak_mib=s['peak_mib'])
        stats = _timing.measure(infer, device, warmup, iters,
                                batch_size=batch, memory=True)
        for name, s in stats.items():
            out[name].update(infer_ms=s['step_ms'],
                             infer_times_ms=s['times_ms'],
                             infer_images_per_s=s['images_per_s'],
                             infer_peak_mib=s['peak_mib'])
    return out


def _ratio(a, b):
    return a / b if a is not None and b else None


def case_rows(stats, amp, mode, tokens, batch):
    """One row per scheme, with ratios against ``none`` (same case) and the
    ``benchmarks/run.py`` summary fields (``ours`` / ``baseline``)."""
    base = stats.get('none', {})
    rows = []
    for name, s in stats.items():
        row = dict(benchmark=f'rope_attention {amp} {mode} {tokens} tokens '
                   'train step', ours=name, baseline='none', scheme=name,
                   amp=amp, mode=mode, tokens=tokens, batch=batch, **s)
        if 'error' not in s and 'train_ms' in base:
            for part in ('train', 'infer'):
                row.update(_timing.ratio(
                    dict(times_ms=s[f'{part}_times_ms']),
                    dict(times_ms=base[f'{part}_times_ms']), f'{part}_ratio'))
            row.update(
                infer_throughput_ratio=_ratio(s['infer_images_per_s'],
                                              base['infer_images_per_s']),
                train_mem_ratio=_ratio(s['train_peak_mib'],
                                       base['train_peak_mib']),
                infer_mem_ratio=_ratio(s['infer_peak_mib'],
                                       base['infer_peak_mib']),
                ours_ms=s['train_ms'], baseline_ms=base['train_ms'],
                ours_peak_mib=s['train_peak_mib'],
                baseline_peak_mib=base['train_peak_mib'],
                ours_images_per_s=s['infer_images_per_s'],
                baseline_images_per_s=base['infer_images_per_s'])
            row.update(time_ratio=row['train_ratio'],
                       time_ratio_low=row['train_ratio_low'],
                       time_ratio_high=row['train_ratio_high'],
                       mem_ratio=row['train_mem_ratio'],
                       throughput_ratio=row['infer_throughput_ratio'])
        rows.append(row)
    return rows


def _f(value, fmt):
    return '' if value is None else format(value, fmt)


def _ratio_cell(row, key):
    return _timing.format_ratio(row, key) if key in row else ''


def markdown(report):
    s = report['settings']
    lines = [
        f"# RoPE attention layer on {s['device']}", '',
        f"`python benchmarks/rope_attention_device.py "
        f"{' '.join(s['argv'])}`", '',
        f"torch {s['torch']}, {s['date']} UTC, autocast: "
        f"{', '.join(s['amps'])}; dim {s['dim']}, {s['heads']} heads, batch "
        f"{s['batch']}, tokens {s['tokens']}"
        + ('' if 'compiled' not in s['modes'] else
           f", compiled at tokens {s['compiled_tokens']}"
           + ('' if s['compiled_tokens'] == s['tokens'] else
              ' only (compile time bound; --compile-all-tokens for all)'))
        + f"; {s['iters']} timed rounds after {s['warmup']} warmup calls.",
        '',
        'Train: forward + backward ms (median of interleaved calls); infer: '
        'no_grad eval forward, images/s = batch / median; peak: MiB the '
        'training step adds (infer peak in the JSON); x none: ratio to the '
        'layer without positions in the same case (time: geometric mean of '
        'the per-round ratios, 95 % paired t interval; infer: its time '
        'ratio).', '',
        f"Shift invariance (max relative logit change): "
        f"{json.dumps(report['shift_invariance_rel_err'])}", '',
        '| amp | scheme | mode | tokens | train ms | x none [95% CI] | infer '
        'img/s | time x none [95% CI] | peak MiB | x none | compile s |',
        '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |']
    for r in report['rows']:
        head = f"| {r['amp']} | {r['scheme']} | {r['mode']} | {r['tokens']} "
        if 'error' in r:
            lines.append(head + f"| error: {r['error'][:120]} "
                         '| | | | | | |')
            continue
        lines.append(
            head + f"| {_f(r.get('train_ms'), '.3f')} "
            f"| {_ratio_cell(r, 'train_ratio')} "
            f"| {_f(r.get('infer_images_per_s'), '.1f')} "
            f"| {_ratio_cell(r, 'infer_ratio')} "
            f"| {_f(r.get('train_peak_mib'), '.1f')} "
            f"| {_f(r.get('train_mem_ratio'), '.3f')} "
            f"| {_f(r.get('compile_s'), '.1f')} |")
    return '\n'.join(lines) + '\n'


def _write(path, text):
    tmp = path.with_name(path.name + '.tmp')
    tmp.write_text(text)
    os.replace(tmp, path)


def device_slug(device):
    if device.type != 'cuda':
        return 'cpu'
    name = torch.cuda.get_device_name(device).lower()
    slug = re.sub(r'[^a-z0-9]+', '_', name).strip('_')
    return re.sub(r'^nvidia_', '', slug) or 'cuda'


def run(quick=False, device='auto', amp=('auto', ), modes=MODES,
        schemes=SCHEMES, iters=None, warmup=None, compile_all_tokens=False,
        out=None, argv=(), provenance=None):
    classes = scheme_classes()
    device = _timing.resolve_device(device)
    amps = {}  # name -> autocast dtype, in the order given, no repeats
    for a in amp:
        dtype = _timing.resolve_amp(a, device)
        amps[str(dtype).replace('torch.', '') if dtype else 'fp32'] = dtype
    tiny = quick and device.type == 'cpu'
    dim, heads = (128, 2) if tiny else (768, 12)
    grids = (4, 8) if tiny else (14, ) if quick else (14, 32)
    batch = 1 if tiny else 2 if device.type == 'cpu' else 64
    iters = iters or (3 if quick else 20)
    warmup = warmup if warmup is not None else (1 if quick else 5)
    schemes = ['none'] + [s for s in schemes if s != 'none']
    tokens = [g * g for g in grids]
    compiled_grids = grids if compile_all_tokens else grids[:1]
    amp_names = list(amps)
    report = dict(
        settings=dict(
            device=(torch.cuda.get_device_name(device)
                    if device.type == 'cuda' else 'cpu'),
            code='benchmarks/rope_attention_device.py',
            torch=torch.__version__, python=sys.version.split()[0],
            date=datetime.datetime.now(datetime.timezone.utc).strftime(
                '%Y-%m-%dT%H:%M:%S'),
            argv=list(argv), quick=quick, amps=amp_names,
            amp=', '.join(amp_names), dim=dim, heads=heads, batch=batch,
            tokens=tokens, compiled_tokens=[g * g for g in compiled_grids],
            modes=list(modes), schemes=schemes, iters=iters, warmup=warmup,
            threads=torch.get_num_threads(),
            float32_matmul_precision=torch.get_float32_matmul_precision(),
            load_start=_timing.load()),
        shift_invariance_rel_err={},
        rows=[])
    paths = None
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        stem = Path(out) / f'{device_slug(device)}_rope_attention'
        paths = stem.with_suffix('.json'), stem.with_suffix('.md')

    def save():
        report['settings']['total_s'] = time.perf_counter() - start
        report['settings']['load_end'] = _timing.load()
        if provenance:
            report['settings']['provenance'] = dict(
                provenance, date=time.strftime('%Y-%m-%d %H:%M UTC',
                                               time.gmtime()),
                machine=f"{report['settings']['device']}, {os.cpu_count()} "
                f'CPUs, torch {torch.__version__}', load=_timing.load())
        if paths:
            _write(paths[0], json.dumps(report, indent=2) + '\n')
            _write(paths[1], markdown(report))

    start = time.perf_counter()
    for name, dtype in amps.items():
        report['shift_invariance_rel_err'][name] = check_shift_invariance(
            classes, device, dtype)
    save()
    for mode in modes:
        for name, dtype in amps.items():
            for grid in (compiled_grids if mode == 'compiled' else grids):
                t0 = time.perf_counter()
                stats = measure_case(classes, schemes, device, dtype, mode,
                                     grid, batch, dim, heads, iters, warmup)
                report['rows'] += case_rows(stats, name, mode, grid * grid,
                                            batch)
                save()
                print(f'[rope_attention] {name} {mode} {grid * grid} tokens:'
                      f' {time.perf_counter() - t0:.1f} s (total '
                      f'{time.perf_counter() - start:.1f} s)',
                      file=sys.stderr, flush=True)
    return report


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true')
    parser.add_argument('--device', default='auto')
    parser.add_argument('--amp', nargs='+', default=['auto'],
                        choices=_timing.AMP_CHOICES,
                        help='autocast dtypes, measured in turn')
    parser.add_argument('--modes', nargs='+', default=list(MODES),
                        choices=MODES)
    parser.add_argument('--schemes', nargs='+', default=list(SCHEMES),
                        choices=SCHEMES,
                        help="schemes to measure ('none' always is)")
    parser.add_argument('--iters', type=int, help='timed rounds')
    parser.add_argument('--warmup', type=int, help='untimed calls per step')
    parser.add_argument('--compile-all-tokens', action='store_true',
                        help='compile at every token count, not the first')
    parser.add_argument('--out', help='write <device>_rope_attention.json '
                        'and .md here')
    parser.add_argument(
        '--provenance', metavar='JSON',
        help='a record of mmpos_harness.provenance written in the '
        'repository (command, commit, depends) for a device without git; '
        'this run fills in its machine, date and load')
    args = vars(parser.parse_args(argv))
    if args['provenance']:
        with open(args['provenance']) as f:
            args['provenance'] = json.load(f)
    print(json.dumps(run(argv=argv, **args), indent=2))


if __name__ == '__main__':
    main()
