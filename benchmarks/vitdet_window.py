"""ViTDet window attention against global attention: one training step.

Forward + backward + AdamW step (``_timing.train_step``) of
``RoPEVisionTransformer`` (RoPE-Mixed, no class token, featmap of the last
block) on one image, measured interleaved in this process:

* ``global``: every block attends over the whole patch grid (ICPF B.2);
* ``windowed``: ViTDet's 14x14 windows in all blocks but 3/6/9/12 (the grid
  padded to a multiple of 14 and cropped after each block);
* ``windowed+cp``: the same with per-block activation checkpointing;
* ``global+math`` and ``windowed+math``: the first two with SDPA's ``math``
  backend (``torch.nn.attention.sdpa_kernel(SDPBackend.MATH)``), which
  materialises ``softmax(q k^T / sqrt(D))`` and keeps it for the backward,
  as ViTDet's own attention code does.

Rows: windowed / global and windowed+cp / global (fused SDPA, what mmpos
runs), windowed+math / global+math (attention matrices stored), and
global+math / global (what storing them costs). With N tokens and windows
of w tokens, the attention of a windowed block costs O(N w) instead of
O(N^2). Fused SDPA (flash attention on CPU and CUDA) never stores the N x N
matrix, so its backward keeps O(N) per block either way and windows change
memory only through the padding (64 -> 70 at 1024 px: 1.2x the tokens in
the windowed blocks); with stored matrices a global block keeps
heads x N^2 floats (768 MiB in fp32 at N = 4096) against
windows x heads x w^2 (25 x 12 x 196^2: 44 MiB) for a windowed one.
Checkpointing keeps one block's activations only.

Full: ViT-B/16 at 1024x1024 (64x64 grid, 25 windows of 14x14 after padding
to 70x70), batch 1. ``--quick``: a 4-block, 192-wide ViT (global blocks 2
and 4) at 448x448 (28x28 grid, 4 windows).

    python benchmarks/vitdet_window.py [--quick] [--models NAME ...]
        [--iters N] [--warmup N]
        [--threads N] [--device auto|cpu|cuda] [--amp auto|off|bf16|fp16]
"""
import contextlib

import _timing
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

FULL = dict(arch='b', size=1024, global_attn_indexes=(2, 5, 8, 11))
QUICK = dict(
    arch=dict(embed_dims=192, num_layers=4, num_heads=3,
              feedforward_channels=768),
    size=448,
    global_attn_indexes=(1, 3))
WINDOW = 14
MODELS = ('global', 'windowed', 'windowed+cp', 'global+math',
          'windowed+math')
MODELS_OPTION = ('--models', dict(nargs='+', choices=MODELS, default=MODELS,
                                  help='subset to measure'))
# (ours, baseline) of the summary rows.
ROWS = (('windowed', 'global'), ('windowed+cp', 'global'),
        ('windowed+math', 'global+math'), ('global+math', 'global'))
ROW = ('{benchmark:<34}{ours:<13}{ours_ms:9.1f} ms {ours_peak_mib:8.1f} MiB '
       '| {baseline:<12}{baseline_ms:9.1f} ms {baseline_peak_mib:8.1f} MiB | '
       'time {time}x, memory {mem_ratio:.3f}x')


class FeatureLoss(torch.nn.Module):
    """The backbone with a stand-in loss: the mean square of its last
    feature map (gradients reach every block). ``math_attention``: the
    forward runs under SDPA's math backend (attention matrices stored)."""

    def __init__(self, backbone, math_attention: bool = False):
        super().__init__()
        self.backbone = backbone
        self.math_attention = math_attention

    def loss(self, images):
        with (sdpa_kernel(SDPBackend.MATH)
              if self.math_attention else contextlib.nullcontext()):
            return self.backbone(images)[-1].float().square().mean()


def build(name: str, setting: dict) -> FeatureLoss:
    from mmpos.models.backbones import RoPEVisionTransformer
    torch.manual_seed(0)
    windowed = name.startswith('windowed')
    return FeatureLoss(
        RoPEVisionTransformer(
            arch=setting['arch'],
            img_size=setting['size'],
            rope=dict(type='mixed'),
            with_cls_token=False,
            out_type='featmap',
            drop_path_rate=0.,
            window_size=WINDOW if windowed else 0,
            global_attn_indexes=setting['global_attn_indexes'],
            with_cp=name.endswith('+cp')),
        math_attention=name.endswith('+math')).train()


def run(quick: bool = False, iters: int = None, warmup: int = None,
        threads: int = None, device: str = 'auto', amp: str = 'auto',
        models: tuple = MODELS) -> dict:
    """``{model: {step_ms, peak_mib, time_ratio, mem_ratio}, 'settings'}``
    for ``models`` (a subset of :data:`MODELS`, e.g. one row's pair: the
    full size takes minutes per step on a CPU), the ratios against the first
    of them."""
    from mmengine.logging import MMLogger
    MMLogger.get_current_instance().setLevel('WARNING')
    device, amp = _timing.setup(device, amp, threads)
    setting = QUICK if quick else FULL
    images = torch.randn(1, 3, setting['size'], setting['size'],
                         device=device)
    unknown = sorted(set(models) - set(MODELS))
    if unknown:
        raise ValueError(f'vitdet_window: unknown models {unknown}, '
                         f'choose from {MODELS}')
    models = [name for name in MODELS if name in models]
    return _timing.compare_train_steps(
        {name: build(name, setting) for name in models}, (images, ),
        models[0], device, amp, quick, iters or (2 if quick else 3), warmup,
        batch_size=1, window_size=WINDOW, **setting)


def summarize(result: dict) -> list:
    """Summary rows (``_timing.comparison``) of :func:`run`'s result."""
    size = result['settings']['size']
    return [
        _timing.comparison(f'vitdet_window {size}px train step', ours,
                           result[ours], base, result[base])
        for ours, base in ROWS if ours in result and base in result
    ]


def main():
    result = _timing.run_cli(__doc__, run, MODELS_OPTION)
    for row in summarize(result):
        print(ROW.format(time=_timing.format_ratio(row), **row))


if __name__ == '__main__':
    main()
