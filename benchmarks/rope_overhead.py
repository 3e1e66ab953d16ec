"""Train-step cost of RoPE ViTs against mmpretrain's ``VisionTransformer``.

For ViT-S and ViT-B (same widths/depths in both implementations) one
training step is: ``zero_grad`` -> forward (class-token output) -> squared-mean
loss -> backward -> AdamW step. Every model is measured in this process on the
same random batch; after ``--warmup`` steps per model, the steps of the models
are interleaved (one step each, ``--iters`` rounds) so that drifts in machine
load hit them alike, and the median step time is reported.

Memory (``_timing.peak_memory``): one extra step per model; on CPU it runs
under ``torch.profiler`` with ``profile_memory=True``, which records every
allocator allocation and free, and "peak MiB" is the maximum of their running
sum, i.e. the highest amount of memory *allocated during the step on top of*
the parameters and AdamW state that exist before it (activations, gradients,
temporaries). It is allocator-level, so unaffected by RSS caching of the C
library. On CUDA it is ``max_memory_allocated`` above the memory allocated
before the step, and the step runs under autocast (bf16 by default).

``--quick`` keeps the widths but uses 2 blocks, batch 2 and 3 timed rounds
(a smoke run; ratios are per-block and remain indicative). No timing is
asserted anywhere; :func:`run` returns the numbers as a dict.

    python benchmarks/rope_overhead.py [--quick] [--batch-size 8]
        [--img-size 224] [--iters 10] [--warmup 3] [--variants mixed axial]
        [--threads 1] [--device auto|cpu|cuda] [--amp auto|off|bf16|fp16]
"""
import argparse

import _timing
import torch

ARCHS = {
    'ViT-S': dict(embed_dims=384, num_layers=12, num_heads=6,
                  feedforward_channels=1536),
    'ViT-B': dict(embed_dims=768, num_layers=12, num_heads=12,
                  feedforward_channels=3072),
}


def build_models(arch: dict, img_size: int, variants) -> dict:
    """``{'APE': mmpretrain ViT, 'RoPE-<variant>': RoPE ViT, ...}``."""
    from mmpretrain.models import VisionTransformer

    from mmpos.models.backbones import RoPEVisionTransformer
    models = {'APE': VisionTransformer(arch=arch, img_size=img_size)}
    for variant in variants:
        models[f'RoPE-{variant}'] = RoPEVisionTransformer(
            arch=arch, img_size=img_size, rope=dict(type=variant),
            use_ape=False)
    return models


def class_token_steps(models: dict, images, device, amp) -> dict:
    """``{name: train step}``: each model (moved to ``device``, train
    mode) on ``images``, loss = squared mean of its last output."""
    steps = {}
    for name, model in models.items():
        model.to(device).train()
        steps[name] = _timing.train_step(
            model, lambda m=model: m(images)[-1].float().square().mean(),
            device, amp)
    return steps


def run(quick: bool = False,
        batch_size: int = None,
        img_size: int = 224,
        iters: int = None,
        warmup: int = None,
        variants=('mixed', ),
        threads: int = None,
        device: str = 'auto',
        amp: str = 'auto') -> dict:
    """Benchmark every arch; returns ``{arch: {model: {step_ms, peak_mib,
    images_per_s, params_m, time_ratio, mem_ratio}}}`` with ratios relative
    to ``APE`` (1 for ``APE`` itself), plus a ``'settings'`` entry.
    ``threads`` sets ``torch.set_num_threads`` (1 gives steadier numbers on a
    shared machine)."""
    device, amp = _timing.setup(device, amp, threads)
    batch_size = batch_size or (2 if quick else 8)
    iters = iters or (3 if quick else 10)
    warmup = warmup if warmup is not None else (1 if quick else 3)
    torch.manual_seed(0)
    images = torch.randn(batch_size, 3, img_size, img_size, device=device)
    results = dict(settings=_timing.settings(
        device, amp, quick=quick, batch_size=batch_size, img_size=img_size,
        iters=iters, warmup=warmup))
    for arch_name, arch in ARCHS.items():
        arch = dict(arch, num_layers=2) if quick else arch
        models = build_models(arch, img_size, variants)
        steps = class_token_steps(models, images, device, amp)
        stats = _timing.measure(steps, device, warmup, iters, batch_size)
        _timing.add_ratios(stats, 'APE')
        for name, model in models.items():
            stats[name]['params_m'] = sum(
                p.numel() for p in model.parameters()) / 1e6
        results[arch_name + (' (2 blocks)' if quick else '')] = stats
    return results


def summarize(results: dict) -> list:
    """Summary rows (``_timing.comparison``) of :func:`run`'s result."""
    return [
        _timing.comparison(f'rope_overhead {arch}', name, stats[name],
                           'mmpretrain VisionTransformer (APE)',
                           stats['APE'], target='<= 1.05 (CPU fp32)')
        for arch, stats in results.items() if arch != 'settings'
        for name in stats if name != 'APE'
    ]


def print_table(results: dict) -> None:
    print('settings:', results['settings'])
    header = (f"{'arch':<18}{'model':<14}{'params M':>9}{'step ms':>10}"
              f"{'peak MiB':>10}{'time x [95% CI]':>22}{'mem x':>8}")
    print(header)
    print('-' * len(header))
    for arch, stats in results.items():
        if arch == 'settings':
            continue
        for name, s in stats.items():
            print(f"{arch:<18}{name:<14}{s['params_m']:>9.2f}"
                  f"{s['step_ms']:>10.1f}{s['peak_mib']:>10.1f}"
                  f"{_timing.format_ratio(s):>22}{s['mem_ratio']:>8.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true')
    parser.add_argument('--batch-size', type=int)
    parser.add_argument('--img-size', type=int, default=224)
    parser.add_argument('--variants', nargs='+', default=['mixed'],
                        choices=['mixed', 'axial'])
    _timing.add_common_args(parser)
    args = _timing.parse_args(parser)
    print_table(
        run(args.quick, args.batch_size, args.img_size, args.iters,
            args.warmup, tuple(args.variants), args.threads, args.device,
            args.amp))


if __name__ == '__main__':
    main()
