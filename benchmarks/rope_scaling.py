"""Cost growth of the RoPE ViT with the input resolution.

Forward pass (eval mode, ``torch.no_grad``; autocast bf16/fp16 on CUDA) of
``RoPEVisionTransformer`` (RoPE-Mixed and RoPE-Axial, no APE) and of
mmpretrain's ``VisionTransformer`` (APE, built for each size) at 224, 448,
896 and 1024 px, i.e. N = 196, 784, 3136 and 4096 tokens of 16 px patches,
batch 1. Per size: median time and peak memory (``_timing.py``), measured
interleaved in this process, and the ratios against mmpretrain's ViT. Per
model: the exponent ``a`` of the least-squares fit ``cost ~ N^a`` of log time
and log memory against log N. Attention costs O(N^2 C) FLOPs against
O(N C^2) for the projections and MLP, so ``a`` moves from 1 towards 2 as N
outgrows the width; with SDPA the attention matrix is never stored, so
memory stays near-linear.

RoPE tables: :func:`count_table_builds` counts the per-block tables the
backbone's position scheme computes around the timed forwards: in these
eval-mode forwards without gradient none after the warm-up call (the
scheme caches its grid's tables); in training once per forward, one table
for all blocks with RoPE-Axial's shared frequencies and one per block with
RoPE-Mixed's learnable ones. Counts, not times:
``tests/test_bench_summary.py`` checks them.

Full: ViT-B. ``--quick``: a 1-block ViT of width 96 (2 heads), so the
attention term dominates early.

    python benchmarks/rope_scaling.py [--quick] [--iters N] [--warmup N]
        [--threads N] [--device auto|cpu|cuda] [--amp auto|off|bf16|fp16]
"""

import _timing
import numpy as np
import torch

SIZES = (224, 448, 896, 1024)
PATCH = 16
ARCH = 'b'
QUICK_ARCH = dict(embed_dims=96, num_layers=1, num_heads=2,
                  feedforward_channels=384)
MODELS = ('APE', 'RoPE-mixed', 'RoPE-axial')
# How main() prints one summary row (``summarize``).
ROW = ('{benchmark:<34}{ours:<12}{ours_ms:9.1f} ms {ours_peak_mib:8.1f} MiB | '
       'ViT {baseline_ms:9.1f} ms {baseline_peak_mib:8.1f} MiB | '
       'time {time}x, memory {mem_ratio:.3f}x')


def build(name: str, arch, size: int) -> torch.nn.Module:
    from mmpretrain.models import VisionTransformer

    from mmpos.models.backbones import RoPEVisionTransformer
    torch.manual_seed(0)
    if name == 'APE':
        return VisionTransformer(arch=arch, img_size=size, patch_size=PATCH)
    return RoPEVisionTransformer(arch=arch, img_size=size, patch_size=PATCH,
                                 rope=dict(type=name.split('-')[1]),
                                 use_ape=False)


def forward_step(model, images, device, amp):
    """One inference forward of ``model`` on ``images``."""

    def step():
        with torch.no_grad(), _timing.autocast(device, amp):
            model(images)

    return step


def count_table_builds(steps, calls: int = 2) -> dict:
    """RoPE tables built
    (:class:`~mmpos.models.layers.positions.RoPETable`) and
    backbone forwards run during ``calls`` rounds of ``steps`` (callables),
    after one warm-up call of each: ``{tables, forwards}``."""
    from mmpos.models.backbones import RoPEVisionTransformer
    from mmpos.models.layers.positions import RoPETable
    counts = dict(tables=0, forwards=0)
    for step in steps:
        step()
    originals = [(RoPETable, '__init__', 'tables'),
                 (RoPEVisionTransformer, 'position_tables', 'forwards')]
    originals = [(cls, name, key, getattr(cls, name))
                 for cls, name, key in originals]
    for cls, name, key, original in originals:
        def wrapped(*args, _key=key, _original=original, **kwargs):
            counts[_key] += 1
            return _original(*args, **kwargs)
        setattr(cls, name, wrapped)
    try:
        for _ in range(calls):
            for step in steps:
                step()
    finally:
        for cls, name, _, original in originals:
            setattr(cls, name, original)
    return counts


def fit_exponent(tokens, values) -> float:
    """Slope of the least-squares line of log(values) against log(tokens)."""
    return float(np.polyfit(np.log(tokens), np.log(values), 1)[0])


def run(quick: bool = False, iters: int = None, warmup: int = None,
        threads: int = None, device: str = 'auto', amp: str = 'auto',
        sizes=SIZES) -> dict:
    """Returns ``{'settings', '<size>px': {model: {step_ms, peak_mib,
    time_ratio, mem_ratio}, 'tokens': N}, 'fit': {model: {time_exponent,
    mem_exponent}}, 'rope_tables': {model: count_table_builds}}``."""
    from mmengine.logging import MMLogger
    MMLogger.get_current_instance().setLevel('WARNING')
    device, amp = _timing.setup(device, amp, threads)
    iters = iters or (3 if quick else 5)
    warmup = warmup if warmup is not None else 1
    arch = QUICK_ARCH if quick else ARCH
    result = dict(settings=_timing.settings(
        device, amp, quick=quick, iters=iters, warmup=warmup, arch=arch,
        batch_size=1, sizes=list(sizes)))
    all_steps = {name: [] for name in MODELS}
    for size in sizes:
        images = torch.randn(1, 3, size, size, device=device)
        steps = {}
        for name in MODELS:
            model = build(name, arch, size).to(device)
            model.eval()  # mmpretrain's train() returns None
            steps[name] = forward_step(model, images, device, amp)
            all_steps[name].append(steps[name])
        stats = _timing.measure(steps, device, warmup, iters, batch_size=1)
        _timing.add_ratios(stats, 'APE')
        result[f'{size}px'] = dict(stats, tokens=(size // PATCH)**2)
    sized = [result[f'{size}px'] for size in sizes]
    tokens = [entry['tokens'] for entry in sized]
    if len(sizes) > 1:
        result['fit'] = {
            name: dict(
                time_exponent=fit_exponent(
                    tokens, [entry[name]['step_ms'] for entry in sized]),
                mem_exponent=fit_exponent(
                    tokens, [entry[name]['peak_mib'] for entry in sized]))
            for name in MODELS
        }
    result['rope_tables'] = {
        name: count_table_builds(all_steps[name])
        for name in MODELS if name != 'APE'
    }
    return result


def summarize(result: dict) -> list:
    """Summary rows (``_timing.comparison``) of :func:`run`'s result."""
    return [
        _timing.comparison(f'rope_scaling {key} (N={stats["tokens"]}) fwd',
                           name, stats[name], 'mmpretrain VisionTransformer',
                           stats['APE'])
        for key, stats in result.items() if key.endswith('px')
        for name in MODELS[1:]
    ]


def markdown(result: dict) -> str:
    """Fitted exponents and RoPE table counts as Markdown."""
    lines = []
    if 'fit' in result:
        lines += ['| model | time exponent | memory exponent |',
                  '|---|---|---|']
        lines += [f'| {name} | {fit["time_exponent"]:.2f} | '
                  f'{fit["mem_exponent"]:.2f} |'
                  for name, fit in result['fit'].items()]
        lines.append('')
    lines += ['RoPE tables during repeated forwards (after one warm-up call '
              'per size):', '', '| model | forwards | tables built |',
              '|---|---|---|']
    lines += [f'| {name} | {c["forwards"]} | {c["tables"]} |'
              for name, c in result['rope_tables'].items()]
    return '\n'.join(lines)


def main():
    result = _timing.run_cli(__doc__, run)
    for row in summarize(result):
        print(ROW.format(time=_timing.format_ratio(row), **row))
    print(markdown(result))


if __name__ == '__main__':
    main()
