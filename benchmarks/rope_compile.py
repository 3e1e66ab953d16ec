"""Inference cost of every position scheme, eager and under
``torch.compile``, against the APE ViT and the ViT without positions.

One ViT-S forward at 224 px (eval mode, ``torch.no_grad``; autocast on
CUDA), batch 8: mmpretrain's ``VisionTransformer`` (APE) and
``RoPEVisionTransformer`` without positions (``none``) and with each scheme
of :data:`mmpos_positions.SCHEMES` (eval tables cached per grid,
:class:`~mmpos_positions.CachedTables`: a forward after the first only
rotates). Every model eager and, for the
models of ``compiled`` (default: APE, axial, mixed),
``torch.compile(model, fullgraph=True)`` (inductor; mmpretrain's APE ViT
without ``fullgraph``: its drop-path rates are tensors, a data-dependent
branch, so dynamo splits it into graphs; compiled in the
warm-up calls, checked against eager within 1e-3 first), and STRING as
deployed, ``string folded`` (its basis folded into the query / key
projections, ``STRINGRoPE.fold_``; checked against the unfolded model
first, both with the same non-zero basis), all timed interleaved in this
process (``_timing.measure``). Ratios: every eager model against eager APE
and eager ``none``, ``string folded`` also against eager ``mixed`` (the
tables it keeps); every compiled model against compiled APE and against
itself eager. The load average is recorded at the
start and the end (a shared machine's load moves ratios).

``--quick``: 2 blocks, batch 2.

    python benchmarks/rope_compile.py [--quick] [--batch-size 8]
        [--iters 10] [--warmup 2] [--threads 1] [--device cpu]
        [--compiled APE axial mixed]
"""
from typing import Sequence

import _timing
import mmpos_positions
import torch

from rope_overhead import ARCHS

SCHEMES = tuple(mmpos_positions.SCHEMES)
OPTIONS = dict(comrope=dict(position_scale=1 / 14),
               liere=dict(position_scale=1 / 13))
COMPILED = ('APE', 'axial', 'mixed')


def build(name: str, arch: dict) -> torch.nn.Module:
    """``'APE'``: mmpretrain's ViT; else a RoPE ViT with scheme ``name``
    (``'none'``: no positions; STRING's bases drawn ``N(0, 0.1)``, so that
    its ``P`` is not the identity; ``'string folded'``: that model in eval
    mode with ``P`` folded into the projections)."""
    from mmpretrain.models import VisionTransformer

    from mmpos.models.backbones import RoPEVisionTransformer
    torch.manual_seed(0)
    if name == 'APE':
        return VisionTransformer(arch=arch, img_size=224)
    scheme = name.split()[0]
    rope = None if name == 'none' else dict(type=scheme,
                                            **OPTIONS.get(scheme, {}))
    model = RoPEVisionTransformer(arch=arch, img_size=224, rope=rope,
                                  use_ape=False)
    if scheme == 'string':
        with torch.no_grad():
            for basis in model.rope.basis:
                basis.normal_(0, .1)
    if name == 'string folded':
        model.eval()
        model.rope = model.rope.fold_([layer.attn.qkv
                                       for layer in model.layers])
    return model


def check_equal(step, ref, what: str) -> None:
    """Refuse ``step`` (``RuntimeError``: ``what`` and the error) where
    its last output differs from that of ``ref`` by more than 1e-3 of the
    largest ``|ref|`` (at least 1)."""
    expected = ref()[-1].float()
    err = (step()[-1].float() - expected).abs().max().item()
    if err > 1e-3 * max(1., expected.abs().max().item()):
        raise RuntimeError(f'{what} by {err:.3g}')


def run(quick: bool = False, batch_size: int = None, iters: int = None,
        warmup: int = None, threads: int = None, device: str = 'auto',
        amp: str = 'auto', compiled: Sequence[str] = COMPILED) -> dict:
    """``{'settings', 'eager': {model: stats}, 'compiled': {model:
    stats}}``; eager stats with ``time_ratio`` (against APE) and
    ``none_ratio``, compiled ones with ``time_ratio`` (against compiled
    APE) and ``eager_ratio`` (each with its interval, ``_timing.ratio``)."""
    from mmengine.logging import MMLogger
    MMLogger.get_current_instance().setLevel('WARNING')
    device, amp = _timing.setup(device, amp, threads)
    batch_size = batch_size or (2 if quick else 8)
    iters = iters or (5 if quick else 10)
    warmup = warmup if warmup is not None else 2
    arch = dict(ARCHS['ViT-S'], num_layers=2) if quick else ARCHS['ViT-S']
    load_start = _timing.load()
    images = torch.randn(batch_size, 3, 224, 224, device=device)
    models = {name: build(name, arch).to(device)
              for name in ('APE', 'none') + SCHEMES + ('string folded', )}
    for model in models.values():
        model.eval()  # mmpretrain's train() returns None
    steps = {}

    def forward(model):

        def step():
            with torch.no_grad(), _timing.autocast(device, amp):
                return model(images)

        return step

    for name, model in models.items():
        steps[name] = forward(model)
    check_equal(steps['string folded'], steps['string'],
                'folded STRING differs from STRING')
    for name in compiled:
        # mmpretrain's ViT breaks the graph (its drop-path rates are
        # tensors: a data-dependent branch); ours are one graph
        fast = forward(torch.compile(models[name],
                                     fullgraph=name != 'APE'))
        check_equal(fast, steps[name],  # compiles
                    f'compiled {name} differs from eager')
        steps[f'{name} compiled'] = fast
    stats = _timing.measure(steps, device, warmup, iters, batch_size)
    eager = {n: s for n, s in stats.items() if not n.endswith('compiled')}
    fast = {n[:-len(' compiled')]: s for n, s in stats.items()
            if n.endswith('compiled')}
    for name, entry in eager.items():
        entry.update(_timing.ratio(entry, eager['none'], 'none_ratio',
                                   (name, 'none')))
    eager['string folded'].update(_timing.ratio(
        eager['string folded'], eager['mixed'], 'mixed_ratio',
        ('string folded', 'mixed')))
    _timing.add_ratios(eager, 'APE')
    if 'APE' in fast:
        _timing.add_ratios(fast, 'APE')
    for name, entry in fast.items():
        entry.update(_timing.ratio(entry, eager[name], 'eager_ratio',
                                   (f'{name} compiled', name)))
    return dict(
        settings=_timing.settings(
            device, amp, quick=quick, batch_size=batch_size, iters=iters,
            warmup=warmup, load_start=load_start, load_end=_timing.load(),
            compiled=list(compiled), size=224,
            vit='ViT-S' + (' (2 blocks)' if quick else '')),
        eager=eager, compiled=fast)


def summarize(result: dict) -> list:
    """Summary rows: every eager model against eager APE (target 1.08x)
    and ``none``, folded STRING against ``mixed``; every compiled model
    against compiled APE and eager."""
    vit = result['settings']['vit']
    eager, fast = result['eager'], result['compiled']
    rows = [
        _timing.comparison(f'rope_compile {vit} 224px fwd eager', name,
                           stats, 'mmpretrain VisionTransformer (APE)',
                           eager['APE'], target='<= 1.08')
        for name, stats in eager.items() if name != 'APE'
    ]
    rows += [
        _timing.comparison(f'rope_compile {vit} 224px fwd eager', name,
                           stats, 'same ViT without positions',
                           eager['none'])
        for name, stats in eager.items() if name not in ('APE', 'none')
    ]
    rows.append(_timing.comparison(
        f'rope_compile {vit} 224px fwd eager', 'string folded',
        eager['string folded'], 'RoPE-Mixed ViT', eager['mixed']))
    rows += [
        _timing.comparison(f'rope_compile {vit} 224px fwd compiled', name,
                           stats, 'compiled APE ViT', fast['APE'],
                           target='<= 1.08')
        for name, stats in fast.items() if name != 'APE' and 'APE' in fast
    ]
    rows += [
        _timing.comparison(f'rope_compile {vit} 224px fwd', f'{name} '
                           'compiled', stats, f'{name} eager', eager[name])
        for name, stats in fast.items()
    ]
    return rows


def markdown(result: dict) -> str:
    s = result['settings']
    lines = [f"Load average {s['load_start']} -> {s['load_end']}; "
             f"{s['vit']}, 224 px, batch {s['batch_size']}, {s['iters']} "
             'interleaved rounds.', '',
             '| model | eager ms | x APE | x none | compiled ms | '
             'x compiled APE | x eager |', '|---|---|---|---|---|---|---|']
    folded = result['eager']['string folded']
    for name, e in result['eager'].items():
        c = result['compiled'].get(name)
        tail = (f"{c['step_ms']:.1f} | {_timing.format_ratio(c)} | "
                f"{_timing.format_ratio(c, 'eager_ratio')}" if c
                else '- | - | -')
        lines.append(f"| {name} | {e['step_ms']:.1f} | "
                     f"{_timing.format_ratio(e)} | "
                     f"{_timing.format_ratio(e, 'none_ratio')} | {tail} |")
    lines += ['', 'string folded / mixed (eager): '
              f"{_timing.format_ratio(folded, 'mixed_ratio')}"]
    return '\n'.join(lines)


if __name__ == '__main__':
    result = _timing.run_cli(
        __doc__, run, _timing.BATCH_SIZE,
        ('--compiled', dict(nargs='*', default=list(COMPILED),
                            choices=('APE', 'none') + SCHEMES,
                            help='models also run compiled')))
    print(markdown(result))
