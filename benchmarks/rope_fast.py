"""Cost of RoPE's rotation by complex phasors (the runtime path,
``fast``) and by real cos / sin tables (the exported path of
:meth:`~mmpos.models.layers.positions.RoPETable.export`, ``cos-sin``).

Three comparisons, everything of one comparison measured in this process on
the same input with interleaved rounds (``_timing.measure``):

* ``rotation``: the RoPE ops alone, forward + backward, at one ViT-S
  layer's size (queries and keys ``(2, B, 6, 197, 64)``, a strided view of
  a qkv tensor as in the layer): the block's table (RoPE-Mixed: from the
  frequencies, gradient to them; RoPE-Axial: from the fixed frequencies) and
  the rotation, fast against cos-sin (the markdown's ``x
  baseline`` column of this part is against ``mixed cos-sin``).
* ``attention``: one :class:`~mmpos.models.layers.RoPEAttention` layer at
  ViT-S width (384 channels, 6 heads, 14 x 14 patches + class token),
  forward + backward (the block's table computed in the step, as the
  backbone does once per forward), without RoPE, RoPE-Axial and
  RoPE-Mixed, each fast and cos-sin; ratios
  against the layer without RoPE (issue 17's goal on CPU fp32: <= 1.03x
  axial, <= 1.05x mixed).
* ``vit_step``: one ViT-S training step (``rope_overhead``'s: forward,
  squared-mean loss of the class token, backward, AdamW) of mmpretrain's
  ``VisionTransformer`` (APE) and RoPE ViTs: RoPE-Mixed and RoPE-Axial;
  ratios against APE (goal: RoPE-Mixed <= 1.05x);
  with ``compile=True`` also RoPE-Mixed under ``torch.compile`` (inductor;
  its compilation happens in the warm-up calls).

``--parts``: a subset of the three (default all; ``vit_step`` takes most
of the time). ``--quick``: batch 2 and 2 blocks. The load average of the machine is
recorded at the start and the end (a shared machine's load moves ratios).

    python benchmarks/rope_fast.py [--quick] [--batch-size 8] [--iters 20]
        [--warmup 3] [--threads 1] [--compile] [--device cpu]
        [--parts rotation attention vit_step]
"""
from typing import Sequence

import _timing
import torch

from rope_overhead import ARCHS, class_token_steps


IMPLS = ('fast', 'cos-sin')


def scheme(rope_type: str, heads: int, head_dim: int, device):
    """A one-block RoPE scheme on ``device``."""
    from mmpos.models.layers.positions import build_position_scheme
    return build_position_scheme(dict(type=rope_type), head_dim, heads,
                                 1).to(device)


def table(rope, impl: str, grid):
    """Block 0's table of ``grid``, as the runtime (``fast``) or the
    exported (``cos-sin``) path rotates."""
    table = rope.block_table(0, grid)
    return table if impl == 'fast' else table.export()


def rotation_steps(batch: int, device) -> dict:
    """``{'<mixed | axial> <fast | cos-sin>': step}``: the RoPE table of the
    grid and the rotation of one ViT-S layer's queries and keys, forward +
    backward."""
    from mmpos.models.layers.positions import grid_coords
    heads, dims, hw = ARCHS['ViT-S']['num_heads'], ARCHS['ViT-S'][
        'embed_dims'], (14, 14)
    tokens = 1 + hw[0] * hw[1]
    qkv = torch.randn(batch, tokens, 3, heads, dims // heads, device=device)
    qk = qkv.permute(2, 0, 3, 1, 4)[:2].requires_grad_()
    grad = torch.randn(qk.shape, device=device)
    grid = grid_coords(*hw, device=device)[None]
    steps = {}
    for rope_type in ('mixed', 'axial'):
        for impl in IMPLS:
            torch.manual_seed(0)
            rope = scheme(rope_type, heads, dims // heads, device)

            def step(rope=rope, impl=impl):
                table(rope, impl, grid).rotate(qk).backward(grad)
                rope.zero_grad(set_to_none=True)
                qk.grad = None

            steps[f'{rope_type} {impl}'] = step
    return steps


def attention_steps(batch: int, device, amp) -> dict:
    """``{name: fwd+bwd step}`` of one ViT-S attention layer per variant."""
    from mmpos.models.layers import RoPEAttention
    from mmpos.models.layers.positions import grid_coords
    dims, heads, hw = ARCHS['ViT-S']['embed_dims'], ARCHS['ViT-S'][
        'num_heads'], (14, 14)
    x = torch.randn(batch, 1 + hw[0] * hw[1], dims, device=device,
                    requires_grad=True)
    grid = grid_coords(*hw, device=device)[None]
    steps = {}
    variants = [('none', 'none', 'fast')] + [
        (f'{rope_type} {impl}', rope_type, impl)
        for rope_type in ('axial', 'mixed') for impl in IMPLS]
    for name, rope_type, impl in variants:
        torch.manual_seed(0)
        layer = RoPEAttention(dims, heads).to(device)
        rope = None if rope_type == 'none' else scheme(
            rope_type, heads, dims // heads, device)

        def step(layer=layer, rope=rope, impl=impl):
            with _timing.autocast(device, amp):
                out = layer(x, rope=None if rope is None else table(
                    rope, impl, grid))
            out.float().sum().backward()
            layer.zero_grad(set_to_none=True)
            if rope is not None:
                rope.zero_grad(set_to_none=True)
            x.grad = None

        steps[name] = step
    return steps


def vit_models(arch: dict, compile: bool) -> dict:
    from mmpretrain.models import VisionTransformer

    from mmpos.models.backbones import RoPEVisionTransformer

    def rope_vit(rope_type):
        torch.manual_seed(0)
        return RoPEVisionTransformer(arch=arch, img_size=224,
                                     rope=dict(type=rope_type), use_ape=False)

    models = {
        'APE': VisionTransformer(arch=arch, img_size=224),
        'RoPE-Mixed fast': rope_vit('mixed'),
        'RoPE-Axial fast': rope_vit('axial'),
    }
    if compile:
        models['RoPE-Mixed fast compiled'] = torch.compile(rope_vit('mixed'))
    return models


PARTS = ('rotation', 'attention', 'vit_step')


def run(quick: bool = False, batch_size: int = None, iters: int = None,
        warmup: int = None, threads: int = None, compile: bool = False,
        device: str = 'auto', amp: str = 'auto',
        parts: Sequence[str] = PARTS) -> dict:
    """``{'settings', 'rotation' | 'attention': {variant: stats},
    'vit_step': {model: stats}}`` (the ``parts`` asked for), stats with
    ``step_ms``, ``peak_mib``, ``time_ratio``, ``mem_ratio`` against
    ``mixed cos-sin`` / ``none`` / ``APE``."""
    unknown = sorted(set(parts) - set(PARTS))
    if unknown or not parts:
        raise ValueError(f'parts must be among {PARTS}, got {list(parts)}')
    device, amp = _timing.setup(device, amp, threads)
    batch_size = batch_size or (2 if quick else 8)
    iters = iters or (5 if quick else 20)
    warmup = warmup if warmup is not None else (1 if quick else 3)
    load_start = _timing.load()
    torch.manual_seed(0)
    result = {}
    if 'rotation' in parts:
        result['rotation'] = _timing.measure(
            rotation_steps(batch_size, device), device, warmup, iters,
            batch_size)
        _timing.add_ratios(result['rotation'], 'mixed cos-sin')
    if 'attention' in parts:
        result['attention'] = _timing.measure(
            attention_steps(batch_size, device, amp), device, warmup, iters,
            batch_size)
        _timing.add_ratios(result['attention'], 'none')
    arch = dict(ARCHS['ViT-S'], num_layers=2) if quick else ARCHS['ViT-S']
    if 'vit_step' in parts:
        images = torch.randn(batch_size, 3, 224, 224, device=device)
        steps = class_token_steps(vit_models(arch, compile), images, device,
                                  amp)
        result['vit_step'] = _timing.measure(steps, device,
                                             warmup + 2 * compile, iters,
                                             batch_size)
        _timing.add_ratios(result['vit_step'], 'APE')
    return dict(
        settings=_timing.settings(
            device, amp, quick=quick, batch_size=batch_size, iters=iters,
            warmup=warmup, compile=compile, load_start=load_start,
            load_end=_timing.load(), parts=list(parts),
            vit='ViT-S' + (' (2 blocks)' if quick else '')),
        **result)


def summarize(result: dict) -> list:
    """Summary rows: every RoPE variant against its baseline."""
    targets = {'axial': '<= 1.03 (CPU fp32)', 'mixed': '<= 1.05 (CPU fp32)'}
    rotation = result.get('rotation', {})
    rows = [
        _timing.comparison(f'rope_fast RoPE-{kind.capitalize()} ops ViT-S '
                           'layer fwd+bwd', f'{kind} fast',
                           rotation[f'{kind} fast'], f'{kind} cos-sin',
                           rotation[f'{kind} cos-sin'])
        for kind in ('mixed', 'axial') if f'{kind} fast' in rotation
    ]
    rows += [
        _timing.comparison('rope_fast attention ViT-S layer fwd+bwd', name,
                           stats, 'same layer without RoPE',
                           result['attention']['none'],
                           target=targets[name.split()[0]])
        for name, stats in result.get('attention', {}).items()
        if name != 'none'
    ]
    rows += [
        _timing.comparison(f"rope_fast {result['settings']['vit']} step",
                           name, stats, 'mmpretrain VisionTransformer (APE)',
                           result['vit_step']['APE'],
                           target='<= 1.05 (Mixed)')
        for name, stats in result.get('vit_step', {}).items()
        if name != 'APE'
    ]
    return rows


def markdown(result: dict) -> str:
    s = result['settings']
    lines = [f"Load average {s['load_start']} -> {s['load_end']}; batch "
             f"{s['batch_size']}, {s['iters']} interleaved rounds.", '',
             '| comparison | variant | ms | x baseline [95% CI] |',
             '|---|---|---|---|']
    for part in PARTS:
        for name, stats in result.get(part, {}).items():
            lines.append(f"| {part} | {name} | {stats['step_ms']:.1f} | "
                         f'{_timing.format_ratio(stats)} |')
    return '\n'.join(lines)


if __name__ == '__main__':
    result = _timing.run_cli(
        __doc__, run, _timing.BATCH_SIZE,
        ('--compile', dict(action='store_true',
                           help='add a torch.compile (inductor) RoPE-Mixed '
                           'ViT-S')),
        ('--parts', dict(nargs='+', choices=PARTS, default=PARTS,
                         help='comparisons to run (default all)')))
    print(markdown(result))
