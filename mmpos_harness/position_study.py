"""RoPE-ViT's resolution claim in miniature, for every position scheme.

Heo et al. (ECCV 2024, Fig. 3-4, Table 5): a ViT with RoPE keeps its
accuracy when the test resolution grows past the training resolution, one
with an absolute position embedding (APE, interpolated) does not. Here the
demo-size ViT (4 blocks, width 96, 3 heads, 8 px patches) is trained with
each scheme on a mini classification task (mini-cls' textured circle /
square / triangle, :mod:`mmpos_harness.mini_data.cls`, rendered at 128 px and
downsampled) at one resolution (32 px: a 4 x 4 grid), with several seeds,
and evaluated at smaller and larger resolutions (the same validation
images resized, as the paper's ResizeEdge + CenterCrop), for the RoPE
schemes also with test-time frequency scaling (the ``freq_scaling`` entry
of ``rope=dict(...)``, :class:`mmpos.models.layers.rope.FrequencyScaling`:
NTK-aware, and YaRN's NTK-by-parts with its attention temperature) at the
larger ones.

    python tools/paper_tables/position_study.py OUT_DIR [--schemes ...]
        [--seeds 0 1 2] [--iters 2000] [--batch-size 32]
        [--sizes 24 32 48 64 96] [--train-size 32] [--num-train 4800]
        [--num-val 1200] [--threads 1]
    python tools/paper_tables/position_study.py OUT_DIR --calibrate
        [--calibrate-iters 500 1000 2000] [--schemes APE RoPE-Mixed]

Every run writes ``OUT_DIR/runs/<scheme>/seed<k>.json`` (accuracies per
size and scaling, seconds) and is skipped when that file exists (the study
resumes). Then ``OUT_DIR/position_study.{md,json,png}``: per scheme and
resolution the top-1 mean +- std over the seeds (sample std) and the
difference to APE, "clear" when larger than twice the pooled std (the
demo's criterion, :mod:`mmpos_harness.comparison.seeds`); the plot shows
accuracy against resolution. ``--calibrate`` trains the reference schemes
for each ``--calibrate-iters`` with the first seed and writes
``OUT_DIR/calibration.{md,json}`` (training-resolution accuracy per
budget, to pick one well below 100%).

Every file is written atomically, so a study killed at any moment resumes
(the same command again) to the same tables; a second study on the same
``OUT_DIR`` is refused while one runs
(:func:`mmpos.utils.launch.work_dir_lock`).
"""
import argparse
import json
import math
import os.path as osp
import sys
import time
from typing import Optional

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from mmpos.analysis.pictures import save_figure
from mmpos.checkpoint import atomic_open, write_atomically
from mmpos.utils.cli import cli_main
from mmpos.utils.launch import work_dir_lock

from .comparison.runs import machine
from .comparison.seeds import _difference, mean_std, write_json

ARCH = dict(embed_dims=96, num_layers=4, num_heads=3,
            feedforward_channels=384)
PATCH, RENDER = 8, 128
SCALINGS = ('ntk', 'yarn')
REFERENCE = 'APE'


def schemes(train_grid: int) -> dict:
    """``{name: backbone kwargs}`` of the compared position schemes for a
    ``train_grid`` x ``train_grid`` training grid (ComRoPE / LieRE
    normalise it to ``[0, 1]`` as their code)."""
    ape = dict(use_ape=True)
    return {
        'APE': dict(rope=None, **ape),
        'RoPE-Axial': dict(rope=dict(type='axial')),
        'RoPE-Mixed': dict(rope=dict(type='mixed')),
        'RoPE-Axial+APE': dict(rope=dict(type='axial'), **ape),
        'RoPE-Mixed+APE': dict(rope=dict(type='mixed'), **ape),
        'DINOv3': dict(rope=dict(type='dinov3')),
        'Spiral': dict(rope=dict(type='spiral')),
        'STRING': dict(rope=dict(type='string')),
        'ComRoPE-LD': dict(rope=dict(type='comrope',
                                     position_scale=1 / train_grid)),
        'LieRE': dict(rope=dict(type='liere',
                                position_scale=1 / (train_grid - 1))),
        'LookHere': dict(rope=dict(type='lookhere')),
    }


def scalable(kwargs: dict) -> bool:
    """Whether test-time frequency scaling applies: linear-angle RoPE in
    the patch frame (DINOv3's normalised frame keeps the extent)."""
    rope = kwargs.get('rope')
    return rope is not None and rope['type'] in ('axial', 'mixed', 'spiral',
                                                 'string')


def with_scaling(kwargs: dict, method: str, train_grid: int) -> dict:
    """``kwargs`` with test-time frequency scaling ``method`` in its
    ``rope`` (:class:`mmpos.models.layers.rope.FrequencyScaling`)."""
    rope = dict(kwargs['rope'],
                freq_scaling=dict(method=method, train_grid=train_grid))
    return dict(kwargs, rope=rope)


# ---------------------------------------------------------------- data
def make_data(path: str, num_train: int, num_val: int) -> dict:
    """mini-cls images rendered at 128 px (uint8 ``(n, 3, 128, 128)``) and
    labels, cached at ``path`` (written atomically)."""
    if osp.isfile(path):
        return torch.load(path, weights_only=True)
    from .mini_data.cls import _class_image
    data = {}
    for split, num, offset in (('train', num_train, 0),
                               ('val', num_val, 10**6)):
        images = [
            _class_image(np.random.default_rng(offset + i), RENDER, i % 3)
            for i in range(num)
        ]
        data[split] = (torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2),
                       torch.arange(num) % 3)
    with atomic_open(path) as f:
        torch.save(data, f)
    return data


def normalise(x: torch.Tensor) -> torch.Tensor:
    """Float images in ``[0, 255]`` -> about zero mean, unit std."""
    return (x / 255. - 0.5) / 0.25


def resize(images: torch.Tensor, size: int) -> torch.Tensor:
    """uint8 images -> normalised float at ``size`` (antialiased)."""
    x = images.float()
    if x.shape[-1] != size:
        x = F.interpolate(x, size=(size, size), mode='bilinear',
                          antialias=True, align_corners=False)
    return normalise(x)


def random_resized_crop(images: torch.Tensor, size: int, scale: float,
                        gen: torch.Generator) -> torch.Tensor:
    """Inception-style crops of ``images`` ``(n, 3, R, R)`` (values in
    ``[0, 255]``): per image an area fraction ``U[scale, 1]`` and aspect
    ratio log-uniform in ``[3/4, 4/3]`` (clipped to the image), placed
    uniformly, averaged down to ``size`` (``roi_align``, adaptive sampling:
    antialiased); normalised."""
    from torchvision.ops import roi_align
    n, side = images.shape[0], images.shape[-1]
    area = torch.empty(n).uniform_(scale, 1., generator=gen) * side**2
    log_ratio = torch.empty(n).uniform_(math.log(3 / 4), math.log(4 / 3),
                                        generator=gen)
    w = (area * log_ratio.exp()).sqrt().clamp(max=side)
    h = (area / log_ratio.exp()).sqrt().clamp(max=side)
    x0 = torch.rand(n, generator=gen) * (side - w)
    y0 = torch.rand(n, generator=gen) * (side - h)
    boxes = torch.stack((torch.arange(n, dtype=torch.float), x0, y0, x0 + w,
                         y0 + h), dim=1)
    crops = roi_align(images.float(), boxes, output_size=size,
                      sampling_ratio=-1, aligned=True)
    return normalise(crops)


# ---------------------------------------------------------------- model
class Classifier(nn.Module):
    """The demo-size RoPE ViT (class token) and a linear head."""

    def __init__(self, train_size: int, **backbone):
        super().__init__()
        from mmpos.models.backbones import RoPEVisionTransformer
        self.backbone = RoPEVisionTransformer(
            arch=ARCH, img_size=train_size, patch_size=PATCH,
            **backbone)
        self.head = nn.Linear(ARCH['embed_dims'], 3)

    def forward(self, x):
        return self.head(self.backbone(x)[0])


def train_run(kwargs: dict, data: dict, seed: int, iters: int,
              train_size: int, sizes, batch_size: int = 32,
              lr: float = 1e-3, crop_scale: Optional[float] = None) -> dict:
    """Train one model, evaluate it; returns ``{'acc': {size: top-1 %},
    'acc_<scaling>': {...}, 'seconds': ...}``. ``crop_scale``: train on
    :func:`random_resized_crop` s of at least that area fraction instead of
    the whole images."""
    start = time.time()
    torch.manual_seed(seed)
    model = Classifier(train_size, **kwargs)
    model.backbone.init_weights()
    images, labels = data['train']
    if crop_scale is None:
        train = resize(images, train_size)
    else:  # crops from a 2x source (cheaper to pool)
        train, images = None, F.interpolate(
            images.float(), size=2 * train_size, mode='bilinear',
            antialias=True)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
    warmup = max(1, iters // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda i: min(1., (i + 1) / warmup) * 0.5 *
        (1 + math.cos(math.pi * min(i, iters) / iters)))
    gen = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(iters):
        idx = torch.randint(len(images), (batch_size, ), generator=gen)
        x = train[idx] if train is not None else random_resized_crop(
            images[idx], train_size, crop_scale, gen)
        flip = torch.rand(batch_size, generator=gen) < 0.5
        x = torch.where(flip[:, None, None, None], x.flip(-1), x)
        loss = F.cross_entropy(model(x), labels[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
    model.eval()
    out = dict(acc=evaluate(model, data['val'], sizes), loss=loss.item())
    larger = [size for size in sizes if size > train_size]
    if scalable(kwargs) and larger:
        for method in SCALINGS:
            # the trained weights in the config with the scaling entry
            scaled = Classifier(train_size, **with_scaling(
                kwargs, method, train_size // PATCH))
            scaled.load_state_dict(model.state_dict())
            out[f'acc_{method}'] = evaluate(scaled.eval(), data['val'],
                                            larger)
    out['seconds'] = time.time() - start
    return out


@torch.no_grad()
def evaluate(model, split, sizes) -> dict:
    """Top-1 (%) of ``model`` on the validation images at each size."""
    images, labels = split
    acc = {}
    for size in sizes:
        correct = 0
        for i in range(0, len(images), 200):
            logits = model(resize(images[i:i + 200], size))
            correct += (logits.argmax(-1) == labels[i:i + 200]).sum().item()
        acc[str(size)] = 100. * correct / len(images)
    return acc


# -------------------------------------------------------------- summary
def variants(runs: dict) -> dict:
    """``{row name: {size: [values over seeds]}}``: each scheme, and each
    scheme + scaling (larger sizes only)."""
    rows = {}
    for name, seeds in runs.items():
        for key in ('acc', *[f'acc_{m}' for m in SCALINGS]):
            label = name if key == 'acc' else f'{name} +{key[4:].upper()}'
            for run in seeds.values():
                for size, value in run.get(key, {}).items():
                    rows.setdefault(label, {}).setdefault(size,
                                                          []).append(value)
    return rows


def summarise(runs: dict, sizes, train_size: int) -> dict:
    """Mean, std and the difference to APE per row and size."""
    table = {}
    rows = variants(runs)
    for label, per_size in rows.items():
        table[label] = {}
        for size in map(str, sizes):
            values = per_size.get(size, [])
            mean, std = mean_std(values)
            table[label][size] = dict(values=values, mean=mean, std=std)
    ref = table.get(REFERENCE, {})
    for label, per_size in table.items():
        if label == REFERENCE:
            continue
        for size, stats in per_size.items():
            stats.update(_difference(stats, ref.get(size)))
    return dict(train_size=train_size, sizes=list(sizes), reference=REFERENCE,
                rows=table)


def _cell(stats: dict) -> str:
    if stats['mean'] is None:
        return '-'
    text = (f"{stats['mean']:.1f}" if stats['std'] is None else
            f"{stats['mean']:.1f} ± {stats['std']:.1f}")
    if stats.get('diff') is not None:
        mark = {True: ' clear', False: '', None: ''}[stats.get('clear')]
        text += f" ({stats['diff']:+.1f}{mark})"
    return text


def markdown(summary: dict, seeds, iters: int) -> str:
    sizes = summary['sizes']
    header = ['scheme'] + [
        f"{s} px{' (train)' if s == summary['train_size'] else ''}"
        for s in sizes
    ]
    lines = [
        f'Top-1 (%) on mini-cls validation images, mean ± std over seeds '
        f'{list(seeds)}, {iters} training iterations at '
        f"{summary['train_size']} px on "
        + ('whole images' if summary.get('crop_scale') is None else
           f"random resized crops of {summary['crop_scale']:g}-1 of the "
           'image area') +
        f"; (Δ vs {summary['reference']}, "
        '"clear" when larger than 2 pooled std). +NTK / +YARN: test-time '
        'frequency scaling at the larger sizes.', '',
        '| ' + ' | '.join(header) + ' |', '|' + ' --- |' * len(header)
    ]
    for label, per_size in summary['rows'].items():
        lines.append('| ' + ' | '.join(
            [label] + [_cell(per_size[str(s)]) for s in sizes]) + ' |')
    return '\n'.join(lines) + '\n'


def plot(summary: dict, path: str) -> None:
    """Top-1 against test resolution: the schemes as trained (left) and
    with test-time frequency scaling (right, NTK dotted, YaRN dashed, APE
    for reference); one colour per scheme."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    rows = summary['rows']
    bases = [label for label in rows if ' +' not in label]
    colours = dict(zip(bases, plt.get_cmap('tab20').colors))
    fig, axes = plt.subplots(1, 2, figsize=(12, 5), sharey=True)
    for label, per_size in rows.items():
        base, _, scaling = label.partition(' +')
        pts = [(int(s), v['mean'], v['std'] or 0.)
               for s, v in per_size.items() if v['mean'] is not None]
        if not pts:
            continue
        if scaling:  # the training size joins the scaled curve
            train = rows[base][str(summary['train_size'])]
            pts = [(summary['train_size'], train['mean'], 0.)] + pts
        xs, ys, es = zip(*pts)
        panels = [axes[1]] if scaling else [axes[0]]
        if label == summary['reference']:
            panels = list(axes)
        for ax in panels:
            ax.errorbar(xs, ys, yerr=es, marker='o', markersize=3,
                        capsize=2, color=colours[base], label=label,
                        linestyle={'': '-', 'NTK': ':',
                                   'YARN': '--'}[scaling])
    for ax, title in zip(axes, ('as trained', 'with test-time frequency '
                                'scaling')):
        ax.axvline(summary['train_size'], color='grey', linewidth=0.8)
        ax.set_xlabel('test resolution (px; training: grey line)')
        ax.set_title(title)
        ax.legend(fontsize=6, ncol=2)
    axes[0].set_ylabel('top-1 (%)')
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


# ------------------------------------------------------------------ CLI
def run_study(args) -> dict:
    data = make_data(
        osp.join(args.out_dir, f'data_{args.num_train}_{args.num_val}.pt'),
        args.num_train, args.num_val)
    table = schemes(args.train_size // PATCH)
    names = args.schemes or list(table)
    unknown = set(names) - set(table)
    if unknown:
        raise SystemExit(f'unknown schemes {sorted(unknown)}; choose from '
                         f'{list(table)}')
    if args.calibrate:
        return calibrate(args, data, table, names)
    runs = {}
    for name in names:
        for seed in args.seeds:
            path = osp.join(args.out_dir, 'runs', name.replace('+', '_'),
                            f'seed{seed}.json')
            if not osp.isfile(path):
                result = train_run(table[name], data, seed, args.iters,
                                   args.train_size, args.sizes,
                                   args.batch_size,
                                   crop_scale=args.crop_scale)
                write_json(path, result, indent=1)  # the run's done marker
                print(f'{name} seed {seed}: {result["acc"]} '
                      f'({result["seconds"]:.0f} s)', flush=True)
            with open(path) as f:
                runs.setdefault(name, {})[seed] = json.load(f)
    summary = summarise(runs, args.sizes, args.train_size)
    summary.update(command=' '.join(sys.argv), date=time.strftime(
        '%Y-%m-%d %H:%M UTC', time.gmtime()), machine=_machine(),
                   iters=args.iters, seeds=args.seeds,
                   crop_scale=args.crop_scale)
    base = osp.join(args.out_dir, 'position_study')
    write_json(base + '.json', summary, indent=1)
    write_atomically(markdown(summary, args.seeds, args.iters).encode(),
                     base + '.md')
    plot(summary, base + '.png')
    print(markdown(summary, args.seeds, args.iters))
    return summary


def calibrate(args, data, table, names) -> dict:
    """Training-resolution accuracy per iteration budget (first seed)."""
    out = {}
    for iters in args.calibrate_iters:
        for name in names:
            result = train_run(table[name], data, args.seeds[0], iters,
                               args.train_size, [args.train_size],
                               args.batch_size, crop_scale=args.crop_scale)
            out.setdefault(str(iters), {})[name] = dict(
                acc=result['acc'][str(args.train_size)],
                seconds=round(result['seconds'], 1))
            print(f'calibration: {name} {iters} it: {out[str(iters)][name]}',
                  flush=True)
    lines = [f'Calibration ({_machine()}, '
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; seed "
             f'{args.seeds[0]}, top-1 % at {args.train_size} px)', '',
             '| iterations | ' + ' | '.join(names) + ' |',
             '|' + ' --- |' * (len(names) + 1)]
    for iters, per in out.items():
        lines.append(f'| {iters} | ' + ' | '.join(
            f"{per[n]['acc']:.1f} ({per[n]['seconds']:.0f} s)"
            for n in names) + ' |')
    write_json(osp.join(args.out_dir, 'calibration.json'), out, indent=1)
    write_atomically(('\n'.join(lines) + '\n').encode(),
                     osp.join(args.out_dir, 'calibration.md'))
    print('\n'.join(lines))
    return out


def _machine() -> str:
    return f'{machine()}, {torch.get_num_threads()} torch threads'


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('out_dir')
    parser.add_argument('--schemes', nargs='+')
    parser.add_argument('--seeds', nargs='+', type=int, default=[0, 1, 2])
    parser.add_argument('--iters', type=int, default=2000)
    parser.add_argument('--batch-size', type=int, default=32)
    parser.add_argument('--sizes', nargs='+', type=int,
                        default=[24, 32, 48, 64, 96])
    parser.add_argument('--train-size', type=int, default=32)
    parser.add_argument('--num-train', type=int, default=4800)
    parser.add_argument('--num-val', type=int, default=1200)
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--crop-scale', type=float, default=None,
                        help='train on random resized crops of at least '
                        'this area fraction (default: whole images)')
    parser.add_argument('--calibrate', action='store_true')
    parser.add_argument('--calibrate-iters', nargs='+', type=int,
                        default=[500, 1000, 2000])
    args = parser.parse_args(argv)
    if args.train_size % PATCH or any(s % PATCH for s in args.sizes):
        parser.error(f'sizes must be multiples of the patch size {PATCH}')
    return args


@cli_main('position_study.py')
def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    # one study per OUT_DIR at a time; what it wrote stays (it resumes)
    with work_dir_lock(args.out_dir, keep_output=lambda: True,
                       option='OUT_DIR'):
        run_study(args)
