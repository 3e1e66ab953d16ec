"""Train-step cost of DINOv3's coordinate augmentation (issue 15).

One DINOv3-style RoPE ViT (axial RoPE with base-100 periods, patch centres
normalised per axis, rotate-half layout, 4 register tokens, LayerScale)
trained with and without the per-sample coordinate augmentation
(``rope=dict(coords=...)``: ``rescale=2`` as DINOv3's released models, and
all three of shift 0.1 / jitter 1.5 / rescale 2). Without augmentation the
grid's cos/sin tables are computed per layer from the normalised coordinates; with
it they are computed per sample (``(B, 1, N, D)`` tables instead of
``(1, N, D)``). The same model in today's default patch-unit frame (cached
integer-grid tables) is listed for reference. Step = forward (class token)
-> squared-mean loss -> backward -> AdamW step, interleaved median
(``_timing.py``); ratios against the DINOv3-style model without
augmentation. No timing is asserted anywhere.

``--quick``: 2 blocks, batch 2, 3 rounds.

    python benchmarks/rope_coord_aug.py [--quick] [--arch small|base]
        [--batch-size 8] [--img-size 224] [--iters 10] [--warmup 3]
        [--threads 1] [--device auto|cpu|cuda] [--amp auto|off|bf16|fp16]
"""
import argparse

import _timing
import torch

ROPE = dict(type='axial', periods=dict(base=100.), axes='yx',
            layout='half')
DINOV3_STYLE = dict(num_register_tokens=4, layer_scale_init_value=1e-5)
VARIANTS = {
    'no augmentation': dict(frame='separate'),
    'rescale 2': dict(frame='separate', rescale=2.),
    'shift+jitter+rescale': dict(frame='separate', shift=0.1, jitter=1.5,
                                 rescale=2.),
    'patch frame (cached)': dict(frame='patch'),
}
BASE = 'no augmentation'


def run(quick: bool = False,
        arch: str = 'small',
        batch_size: int = None,
        img_size: int = 224,
        iters: int = None,
        warmup: int = None,
        threads: int = None,
        device: str = 'auto',
        amp: str = 'auto') -> dict:
    """``{'settings': ..., arch: {variant: {step_ms, peak_mib,
    images_per_s, time_ratio, mem_ratio}}}``, ratios against
    ``'no augmentation'``."""
    from mmpos.models.backbones import RoPEVisionTransformer
    device, amp = _timing.setup(device, amp, threads)
    batch_size = batch_size or (2 if quick else 8)
    iters = iters or (3 if quick else 10)
    warmup = warmup if warmup is not None else (1 if quick else 3)
    arch_cfg = dict(RoPEVisionTransformer.arch_zoo[arch])
    if quick:
        arch_cfg['num_layers'] = 2
    torch.manual_seed(0)
    images = torch.randn(batch_size, 3, img_size, img_size, device=device)
    steps = {}
    for name, coords in VARIANTS.items():
        torch.manual_seed(0)
        model = RoPEVisionTransformer(
            arch=arch_cfg, img_size=img_size,
            rope=dict(ROPE, coords=coords), **DINOV3_STYLE).to(device).train()
        steps[name] = _timing.train_step(
            model, lambda m=model: m(images)[-1].float().square().mean(),
            device, amp)
    stats = _timing.measure(steps, device, warmup, iters, batch_size)
    _timing.add_ratios(stats, BASE)
    label = f'ViT-{arch[0].upper()}' + (' (2 blocks)' if quick else '')
    return {'settings': _timing.settings(
        device, amp, quick=quick, batch_size=batch_size, img_size=img_size,
        iters=iters, warmup=warmup), label: stats}


def summarize(results: dict) -> list:
    """Summary rows (``_timing.comparison``) of :func:`run`'s result."""
    return [
        _timing.comparison(f'rope_coord_aug {arch}', name, stats[name],
                           f'DINOv3-style ViT, {BASE}', stats[BASE],
                           target='~1.0')
        for arch, stats in results.items() if arch != 'settings'
        for name in stats if name != BASE
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true')
    parser.add_argument('--arch', default='small', choices=['small', 'base'])
    parser.add_argument('--batch-size', type=int)
    parser.add_argument('--img-size', type=int, default=224)
    _timing.add_common_args(parser)
    args = _timing.parse_args(parser)
    results = run(args.quick, args.arch, args.batch_size, args.img_size,
                  args.iters, args.warmup, args.threads, args.device,
                  args.amp)
    print('settings:', results.pop('settings'))
    for arch, stats in results.items():
        for name, s in stats.items():
            print(f"{arch:<20}{name:<24}{s['step_ms']:>9.1f} ms"
                  f"{_timing.format_ratio(s):>22}x time"
                  f"{s.get('mem_ratio', float('nan')):>8.3f}x memory")


if __name__ == '__main__':
    main()
