"""NaFlex batches against square resizing: padding and tokens per second.

A fixed mix of aspect ratios (:data:`ASPECTS`, portrait 1:3 to panorama
3:1, sizes 200 to 1000 px, drawn from a seeded generator) is batched two
ways for a ViT with ``patch`` pixels per patch and a budget of ``budget``
tokens per image:

* ``NaFlex``: every image at its own aspect ratio, its size by timm's rule
  (:func:`mmpos.datasets.transforms.naflex_size`), the batch padded to its
  longest sequence with a key mask
  (:meth:`~mmpos.models.backbones.RoPEVisionTransformer.forward_naflex`);
  in dataset order, or ``sorted`` by length first (the batches of timm's
  NaFlex loader hold similar lengths);
* ``square``: every image resized to the ``sqrt(budget)``-patch square
  (no padding; each image's aspect ratio is lost).

:func:`padding_stats` (deterministic, no model) gives each way's padding
fraction, its real tokens per image and the square's aspect distortion
(mean ``|log|`` of the ratio change). :func:`run` then times a training
step (forward + backward of the pooled output's sum, ``_timing.measure``,
interleaved) of a RoPE-Mixed ViT on one batch of each kind and reports
**real** (non-padding) tokens per second and the ratio of step times.

    python benchmarks/naflex_padding.py [--quick] [--arch small] [--budget 256]
        [--batch-size 32] [--iters N] [--warmup N] [--threads N]
        [--device auto|cpu|cuda] [--amp auto|off|bf16|fp16]
"""
import math
from typing import List, Sequence, Tuple

import _timing
import numpy as np
import torch

from mmpos.datasets.naflex import pad_naflex
from mmpos.datasets.transforms import naflex_size

#: width / height of the mix (equally likely)
ASPECTS = (1 / 3, 1 / 2, 2 / 3, 3 / 4, 1., 4 / 3, 3 / 2, 16 / 9, 2., 3.)
ROW = ('{benchmark:<36} square {baseline_ms:8.1f} ms | NaFlex '
       '{ours_ms:8.1f} ms | NaFlex / square: time {time}x')


def image_sizes(num: int, seed: int = 0) -> List[Tuple[int, int]]:
    """``num`` ``(h, w)`` of the mix: an aspect of :data:`ASPECTS` and a
    longer side in ``[200, 1000]`` px, from a seeded generator."""
    rng = np.random.default_rng(seed)
    sizes = []
    for _ in range(num):
        aspect = ASPECTS[rng.integers(len(ASPECTS))]
        longer = int(rng.integers(200, 1001))
        h, w = (longer, longer * aspect) if aspect < 1 else (longer / aspect,
                                                             longer)
        sizes.append((max(1, round(h)), max(1, round(w))))
    return sizes


def padding_stats(sizes: Sequence[Tuple[int, int]], patch: int = 16,
                  budget: int = 256, batch_size: int = 32,
                  sort: bool = False) -> dict:
    """Padding of NaFlex batches of ``sizes`` (in order, or sorted by token
    count) and the square baseline.

    Returns ``{'naflex': {padding, tokens_per_image, padded_per_image},
    'square': {padding, tokens_per_image, aspect_distortion}}``: padding as
    a fraction of all sequence slots, tokens the real ones per image.
    """
    tokens = [math.prod(s // patch for s in naflex_size(hw, patch, budget))
              for hw in sizes]
    if sort:
        tokens = sorted(tokens)
    slots = sum(max(tokens[i:i + batch_size]) * len(tokens[i:i + batch_size])
                for i in range(0, len(tokens), batch_size))
    side = math.isqrt(budget)
    distortion = np.mean([abs(math.log(h / w)) for h, w in sizes])
    return dict(
        naflex=dict(padding=1 - sum(tokens) / slots,
                    tokens_per_image=sum(tokens) / len(tokens),
                    padded_per_image=slots / len(tokens)),
        square=dict(padding=0., tokens_per_image=float(side * side),
                    aspect_distortion=float(distortion)))


def naflex_batch(sizes, patch: int, budget: int, device) -> dict:
    """A NaFlex batch of random pixels for ``sizes`` (the collate's
    layout)."""
    samples = []
    for hw in sizes:
        h, w = (s // patch for s in naflex_size(hw, patch, budget))
        ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w),
                                indexing='ij')
        samples.append(dict(
            patches=torch.randn(h * w, patch * patch * 3),
            patch_coord=torch.stack((ys.flatten(), xs.flatten()), -1)))
    return {k: v.to(device) for k, v in pad_naflex(samples).items()}


def run(quick: bool = False, iters: int = None, warmup: int = None,
        threads: int = None, device: str = 'auto', amp: str = 'auto',
        malloc: str = 'reuse', arch: str = 'small', budget: int = 256,
        batch_size: int = 32) -> dict:
    """Returns ``{'settings', 'padding': {order: padding_stats},
    'budget=<T>': {'square': stats, 'NaFlex': stats, 'NaFlex sorted':
    stats}}``, each step's stats with ``tokens_per_s`` (real tokens)."""
    from mmpos.models.backbones import RoPEVisionTransformer
    _timing.use_malloc(malloc)
    device, amp = _timing.setup(device, amp, threads)
    iters = iters or (2 if quick else 10)
    warmup = warmup if warmup is not None else 1
    arch = 'tiny' if quick else arch
    batch_size = 4 if quick else batch_size
    budget = 64 if quick else budget
    patch = 16
    sizes = image_sizes(batch_size * (1 if quick else 8))
    result = dict(settings=_timing.settings(
        device, amp, quick=quick, iters=iters, warmup=warmup, arch=arch,
        budget=budget, batch_size=batch_size, patch=patch),
        padding={order: padding_stats(sizes, patch, budget, batch_size,
                                      sort=order == 'sorted')
                 for order in ('in order', 'sorted')})
    torch.manual_seed(0)
    model = RoPEVisionTransformer(arch=arch, patch_size=patch,
                                  img_size=math.isqrt(budget) * patch,
                                  out_type='avg_featmap').to(device)
    side = math.isqrt(budget) * patch
    batches = dict(
        square=torch.randn(batch_size, 3, side, side, device=device),
        NaFlex=naflex_batch(sizes[:batch_size], patch, budget, device),
        **{'NaFlex sorted': naflex_batch(
            sorted(sizes, key=lambda hw: math.prod(naflex_size(
                hw, patch, budget)))[:batch_size], patch, budget, device)})
    steps = {}
    for name, batch in batches.items():

        def step(batch=batch):
            with _timing.autocast(device, amp):
                out = model(batch)[0]
            out.float().sum().backward()

        steps[name] = step
    stats = _timing.measure(steps, device, warmup, iters, batch_size)
    _timing.add_ratios(stats, 'square')
    for name, batch in batches.items():
        real = (batch_size * budget if name == 'square' else
                int(batch['patch_valid'].sum()))
        stats[name]['tokens_per_s'] = real / (stats[name]['step_ms'] / 1e3)
    result[f'budget={budget}'] = stats
    return result


def main():
    result = _timing.run_cli(
        __doc__, run, ('--arch', dict(default='small')),
        ('--budget', dict(type=int, default=256)),
        ('--batch-size', dict(type=int, default=32)))
    for order, stats in result['padding'].items():
        print(f"padding ({order}): NaFlex {stats['naflex']['padding']:.3f} "
              f"({stats['naflex']['tokens_per_image']:.1f} real tokens / "
              f"image), square 0 ({stats['square']['tokens_per_image']:.0f}"
              f" tokens, aspect distortion |log| "
              f"{stats['square']['aspect_distortion']:.2f})")
    for key, stats in result.items():
        if key.startswith('budget='):
            for name in ('NaFlex', 'NaFlex sorted'):
                row = _timing.comparison(f'naflex_padding {key} {name}',
                                         name, stats[name], 'square',
                                         stats['square'])
                print(ROW.format(time=_timing.format_ratio(row), **row),
                      f"| real tokens/s: {name} "
                      f"{stats[name]['tokens_per_s']:.0f}, square "
                      f"{stats['square']['tokens_per_s']:.0f}")


if __name__ == '__main__':
    main()
