"""2-D Fourier reconstruction with RoPE frequencies (RoPE-ViT Fig. 1).

    python tools/analysis_tools/rope_fourier.py [--config CONFIG
        --checkpoint CKPT] [--layer 0] [--head 0] [--head-dim 64]
        [--grid 64] [--scale 1] [--out-dir DIR]

Compares the axial frequencies (Eq. 12-13, theta 100) with mixed ones: the
learnt ``rope.freqs.<layer>`` of a RoPE-Mixed checkpoint when
CONFIG/CKPT are given, otherwise the mixed initialisation (theta 10, a
random direction per head, seed 0). A point target is reconstructed from
its spectrum restricted to the bins of one head's frequencies (see
mmpos/analysis/fourier.py). Writes ``rope_fourier.json`` (bins used, relative
L2 error per variant) and ``rope_fourier.png`` (target, reconstructions,
used bins).
"""
import argparse
import json
import os.path as osp

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from mmpos.analysis.pictures import save_figure  # noqa: E402
from mmpos.checkpoint import write_atomically  # noqa: E402
from mmpos.analysis.fourier import (frequency_mask, point_target,  # noqa
                                    reconstruct, reconstruction_error)
from mmpos_positions import (AxialRoPE, MixedRoPE,  # noqa: E402
                             mixed_frequencies)
from mmpos.guardrails.cli import cli_main  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--config')
    parser.add_argument('--checkpoint')
    parser.add_argument('--layer', type=int, default=0)
    parser.add_argument('--head', type=int, default=0,
                        help='-1: the union of all heads\' frequencies')
    parser.add_argument('--num-heads', type=int, default=12,
                        help='without a checkpoint (ViT-B: 12)')
    parser.add_argument('--head-dim', type=int, default=64,
                        help='without a checkpoint (ViT-B: 64)')
    parser.add_argument('--grid', type=int, default=64)
    parser.add_argument('--scale', type=float, default=1.0,
                        help='grid samples per patch unit')
    parser.add_argument('--out-dir', default='work_dirs/analysis')
    return parser.parse_args(argv)


def learnt_frequencies(args):
    """(2, D/2) mixed frequencies of one head from a checkpoint."""
    from mmpos.analysis.attention import attention_backbone
    backbone = attention_backbone(args.config, args.checkpoint)
    if not 0 <= args.layer < len(backbone.layers):
        raise SystemExit(f'--layer {args.layer}: the backbone has '
                         f'{len(backbone.layers)} layers')
    rope = backbone.rope
    if not isinstance(rope, MixedRoPE):
        raise SystemExit(f'{args.config}: layer {args.layer} has no '
                         'RoPE-Mixed frequencies')
    if not -1 <= args.head < rope.num_heads:
        raise SystemExit(f'--head {args.head}: {rope.num_heads} heads')
    freqs = rope.freqs[args.layer].detach()
    return (freqs.flatten(1) if args.head == -1 else freqs[:, args.head],
            rope.head_dim)


@cli_main('rope_fourier.py')
def main(argv=None):
    args = parse_args(argv)
    if args.config:
        mixed, head_dim = learnt_frequencies(args)
        source = f'{args.checkpoint or "init"} layer {args.layer} head ' \
                 f'{"all" if args.head == -1 else args.head}'
    else:
        torch.manual_seed(0)
        head_dim = args.head_dim
        mixed = mixed_frequencies(head_dim, args.num_heads)
        mixed = mixed.flatten(1) if args.head == -1 else mixed[:, args.head]
        source = ('mixed initialisation (seed 0), head '
                  f'{"all" if args.head == -1 else args.head}')
    variants = {'axial': AxialRoPE(head_dim, 1, 1).freqs.float(),
                'mixed': mixed}
    target = point_target(args.grid)
    results, recons, masks = {}, {}, {}
    for name, freqs in variants.items():
        masks[name] = frequency_mask(freqs, args.grid, args.scale)
        recons[name] = reconstruct(target, masks[name])
        results[name] = dict(
            bins=int(masks[name].sum()),
            rel_l2_error=reconstruction_error(target, recons[name]))
    stem = osp.join(args.out_dir, 'rope_fourier')
    write_atomically(json.dumps(dict(
        source=source, head_dim=head_dim, grid=args.grid, scale=args.scale,
        **results), indent=1).encode(), stem + '.json')
    fig, axes = plt.subplots(1, 5, figsize=(17, 3.6))
    axes[0].imshow(target, cmap='gray')
    axes[0].set_title('target')
    for i, name in enumerate(variants):
        axes[1 + i].imshow(recons[name], cmap='gray')
        axes[1 + i].set_title(f'{name}: {results[name]["bins"]} bins, '
                              f'err {results[name]["rel_l2_error"]:.3f}')
        axes[3 + i].imshow(np.fft.fftshift(masks[name]), cmap='viridis')
        axes[3 + i].set_title(f'{name} frequency bins')
    for ax in axes:
        ax.axis('off')
    fig.suptitle(source)
    fig.tight_layout()
    save_figure(fig, stem + '.png', dpi=90)
    print(f'wrote {stem}.json and .png: ' + ', '.join(
        f'{k} err {v["rel_l2_error"]:.3f}' for k, v in results.items()))


if __name__ == '__main__':
    main()
