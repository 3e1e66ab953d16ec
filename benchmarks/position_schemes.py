"""Attention-layer cost of every position scheme against no positions.

One :class:`~mmpos.models.layers.RoPEAttention` layer at ViT-S width (384
channels, 6 heads of 64, 14 x 14 patches + class token), one training step
(``_timing.compare_train_steps``: forward, squared-mean loss, backward,
AdamW) per scheme, all measured in this process on the same input with
interleaved rounds. Each step includes what the scheme costs per block: its
table computed from the integer grid (in the scheme's frame) for the layer,
i.e. a one-block scheme (``depth=1``; the backbone computes all blocks'
tables once per forward, so a block's share is the same), then the
rotation (or bias) in the attention. Ratios against the same layer without
positions (``none``).

Schemes: ``axial``, ``mixed``, ``dinov3`` (mmpos' RoPE), ``spiral``,
``string``, ``comrope`` (LD, 8 x 8 blocks), ``liere`` (8 x 8 blocks),
``lookhere`` (LH-180), ``pape`` (50 parabolas per head), ``pape_ri``,
``golden_gate``: every scheme of :data:`mmpos_positions.SCHEMES`. Target:
the matrix schemes (ComRoPE, LieRE) at most 1.5x the layer without
positions (:data:`TARGETS`).
``--quick``: batch 2, 3 rounds.

    python benchmarks/position_schemes.py [--quick] [--batch-size 8]
        [--iters 10] [--warmup 2] [--threads 1] [--device cpu]
"""
import _timing
import mmpos_positions
import torch
import torch.nn as nn

WIDTH, HEADS, GRID = 384, 6, (14, 14)
# the matrix schemes' codes span the training grid by [0, 1]
OPTIONS = dict(comrope=dict(position_scale=1 / GRID[0]),
               liere=dict(position_scale=1 / (GRID[0] - 1)))
#: ``none`` and every registered scheme, in registration order
SCHEMES = {'none': None, **{name: dict(type=name, **OPTIONS.get(name, {}))
                            for name in mmpos_positions.SCHEMES}}
TARGETS = dict(comrope='<= 1.5', liere='<= 1.5')


class SchemeAttention(nn.Module):
    """One attention layer with a one-block position scheme: the loss of
    a step builds the table for the grid and attends with it."""

    def __init__(self, rope):
        super().__init__()
        from mmpos.models.layers import RoPEAttention
        from mmpos.models.layers.positions import build_position_scheme
        self.attn = RoPEAttention(WIDTH, HEADS)
        self.rope = build_position_scheme(rope, WIDTH // HEADS, HEADS, 1)

    def loss(self, x, coords):
        table = None
        if self.rope is not None:
            table = self.rope(coords, GRID, x.shape[0])[0]
        return self.attn(x, rope=table, hw=GRID).square().mean()


def run(quick: bool = False, batch_size: int = None, iters: int = None,
        warmup: int = None, threads: int = None, device: str = 'auto',
        amp: str = 'auto') -> dict:
    """``{scheme: {step_ms, peak_mib, images_per_s, time_ratio, mem_ratio},
    'settings': ...}``, ratios against ``'none'``."""
    from mmpos.models.layers.positions import grid_coords
    device, amp = _timing.setup(device, amp, threads)
    batch_size = batch_size or (2 if quick else 8)
    torch.manual_seed(0)
    models = {name: SchemeAttention(cfg) for name, cfg in SCHEMES.items()}
    x = torch.randn(batch_size, 1 + GRID[0] * GRID[1], WIDTH, device=device)
    coords = grid_coords(*GRID, device=device)[None]
    return _timing.compare_train_steps(
        models, (x, coords), 'none', device, amp, quick, iters, warmup,
        batch_size, width=WIDTH, heads=HEADS, grid=GRID)


def summarize(result: dict) -> list:
    """Summary rows (``_timing.comparison``): every scheme against the
    layer without positions."""
    return [
        _timing.comparison('position_schemes ViT-S attention layer step',
                           name, stats, 'same layer without positions',
                           result['none'], target=TARGETS.get(name))
        for name, stats in result.items() if name not in ('settings', 'none')
    ]


def markdown(result: dict) -> str:
    """Per scheme: ms per step, peak MiB, both ratios to ``none`` and the
    median page faults of a step."""
    lines = ['| scheme | ms | x none [95% CI] | peak MiB | mem x none | '
             'page faults |', '|---|---|---|---|---|---|']
    for name, s in result.items():
        if name == 'settings':
            continue
        lines.append(f"| {name} | {s['step_ms']:.1f} | "
                     f"{_timing.format_ratio(s)} | {s['peak_mib']:.1f} | "
                     f"{s.get('mem_ratio', float('nan')):.3f} | "
                     f"{s.get('faults', '-')} |")
    return '\n'.join(lines)


def main():
    result = _timing.run_cli(__doc__, run, _timing.BATCH_SIZE)
    print(markdown(result))


if __name__ == '__main__':
    main()
