"""Activation checkpointing (``with_cp``) of a RoPE ViT: memory and time.

One RoPE-Mixed ViT-B/16 training step (``rope_overhead``'s: forward,
squared-mean loss of the class token, backward, AdamW) with and without
``with_cp=True`` (each block's activations recomputed in the backward
pass), both models with the same weights, measured in this process with
interleaved rounds (``_timing.measure``). Peak memory is what the step
allocates on top of the parameters and AdamW state (``_timing.peak_memory``:
activations, gradients, temporaries). Issue 17's goal: >= 2x lower memory
for < 1.35x time.

``--quick``: ViT-S with 2 blocks, batch 2.

    python benchmarks/checkpointing.py [--quick] [--batch-size 8]
        [--iters 5] [--warmup 1] [--threads 1] [--device cpu]
"""

import _timing
import torch

from rope_overhead import ARCHS, class_token_steps


def run(quick: bool = False, batch_size: int = None, iters: int = None,
        warmup: int = None, threads: int = None, device: str = 'auto',
        amp: str = 'auto') -> dict:
    """``{'settings', 'steps': {'no checkpointing' | 'with_cp': {step_ms,
    peak_mib, images_per_s, time_ratio, mem_ratio}}}``."""
    from mmpos.models.backbones import RoPEVisionTransformer
    device, amp = _timing.setup(device, amp, threads)
    batch_size = batch_size or (2 if quick else 8)
    iters = iters or (3 if quick else 5)
    warmup = warmup if warmup is not None else 1
    arch_name = 'ViT-S' if quick else 'ViT-B'
    arch = dict(ARCHS[arch_name], num_layers=2) if quick else ARCHS[arch_name]
    load_start = _timing.load()
    torch.manual_seed(0)
    images = torch.randn(batch_size, 3, 224, 224, device=device)
    models = {
        name: RoPEVisionTransformer(arch=arch, img_size=224,
                                    rope=dict(type='mixed'), use_ape=False,
                                    with_cp=with_cp)
        for name, with_cp in (('no checkpointing', False), ('with_cp', True))
    }
    models['with_cp'].load_state_dict(models['no checkpointing'].state_dict())
    steps = class_token_steps(models, images, device, amp)
    stats = _timing.measure(steps, device, warmup, iters, batch_size)
    _timing.add_ratios(stats, 'no checkpointing')
    return dict(
        settings=_timing.settings(
            device, amp, quick=quick, batch_size=batch_size, iters=iters,
            warmup=warmup, arch=arch_name + (' (2 blocks)' if quick else ''),
            load_start=load_start,
            load_end=_timing.load()),
        steps=stats)


def summarize(result: dict) -> list:
    """One row: ``with_cp`` against no checkpointing."""
    steps = result['steps']
    return [_timing.comparison(
        f"checkpointing RoPE-Mixed {result['settings']['arch']} step",
        'with_cp', steps['with_cp'], 'no checkpointing',
        steps['no checkpointing'], target='mem <= 0.5, time < 1.35')]


if __name__ == '__main__':
    result = _timing.run_cli(__doc__, run, _timing.BATCH_SIZE)
    for name, stats in result['steps'].items():
        print(_timing.step_line(name, stats, 20),
              f"time x {_timing.format_ratio(stats)}",
              f"mem x {stats['mem_ratio']:.3f}")
