"""Patch-attention NMI and mean attention distance per layer on an image
folder (ICPF App. A.1, after Park et al.), and last-layer attention maps of
chosen query points (App. A.2).

    python tools/analysis_tools/attention_nmi.py CONFIG [--checkpoint CKPT]
        --img-dir DIR [--img-size 480] [--num-images 32]
        [--queries 0.5,0.5 0.25,0.75] [--out-dir DIR]

Writes ``attention_nmi.csv`` / ``.json`` (per layer: NMI and MAD in pixels,
each averaged over heads, then over images), ``attention_nmi.png`` (both
curves) and ``attention_queries.png`` (for the first images: the image with
the query point in red, then the head-averaged last-layer attention of that
query patch over all patches). Query points are ``x,y`` fractions of the
image width/height.
"""
import argparse
import os
import os.path as osp

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from mmpos.apis.features import IMAGENET_MEAN, IMAGENET_STD  # noqa: E402
from mmpos.analysis.attention import (attention_backbone, list_images,  # noqa
                                      load_images, record_attention,
                                      resize_for, upsample_map, write_rows)
from mmpos.analysis.metrics import attention_distance, attention_nmi  # noqa
from mmpos.analysis.pictures import save_figure  # noqa: E402
from mmpos.guardrails.cli import cli_main  # noqa: E402


def parse_point(text):
    try:
        x, y = (float(v) for v in text.split(','))
    except ValueError:
        raise argparse.ArgumentTypeError(f'query {text!r}: expected x,y')
    if not (0 <= x < 1 and 0 <= y < 1):
        raise argparse.ArgumentTypeError(f'query {text!r}: x and y must be '
                                         'fractions in [0, 1)')
    return x, y


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config')
    parser.add_argument('--checkpoint')
    parser.add_argument('--img-dir', required=True)
    parser.add_argument('--img-size', type=int, default=480)
    parser.add_argument('--num-images', type=int, default=32)
    parser.add_argument('--batch-size', type=int, default=4)
    parser.add_argument('--queries', type=parse_point, nargs='+',
                        default=[(0.5, 0.5), (0.25, 0.25)])
    parser.add_argument('--num-show', type=int, default=2,
                        help='images shown in attention_queries.png')
    parser.add_argument('--out-dir', default='work_dirs/analysis')
    return parser.parse_args(argv)


@cli_main('attention_nmi.py')
def main(argv=None):
    args = parse_args(argv)
    backbone = attention_backbone(args.config, args.checkpoint)
    size = resize_for(backbone, args.img_size)
    p = backbone.patch_size[0]
    hw = (size // p, size // p)
    prefix = backbone.num_extra_tokens
    paths = list_images(args.img_dir, args.num_images)
    os.makedirs(args.out_dir, exist_ok=True)

    sums, shown = None, None
    for start in range(0, len(paths), args.batch_size):
        chunk = paths[start:start + args.batch_size]
        images = load_images(chunk, size)
        maps = record_attention(backbone, images)
        stats = torch.stack([
            torch.stack((attention_nmi(a, prefix).mean(),
                         attention_distance(a, hw, prefix).mean() * p))
            for a in maps
        ]) * len(chunk)
        sums = stats if sums is None else sums + stats
        if shown is None:
            shown = (images[:args.num_show], maps[-1][:args.num_show])
    stats = (sums / len(paths)).tolist()
    rows = [dict(layer=i, nmi=nmi, mad_px=mad)
            for i, (nmi, mad) in enumerate(stats)]
    stem = osp.join(args.out_dir, 'attention_nmi')
    write_rows(stem, rows, config=args.config, checkpoint=args.checkpoint,
               img_size=size, num_images=len(paths))
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    layers = [r['layer'] + 1 for r in rows]
    axes[0].plot(layers, [r['nmi'] for r in rows], 'o-')
    axes[0].set_title('NMI')
    axes[1].plot(layers, [r['mad_px'] for r in rows], 'o-')
    axes[1].set_title('mean attention distance (px)')
    for ax in axes:
        ax.set_xlabel('layer')
    fig.tight_layout()
    save_figure(fig, stem + '.png', dpi=100)

    images, last = shown
    mean = torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(3, 1, 1)
    fig, axes = plt.subplots(len(images), 1 + len(args.queries),
                             figsize=(3 * (1 + len(args.queries)),
                                      3 * len(images)), squeeze=False)
    for i, image in enumerate(images):
        rgb = ((image * std + mean).clamp(0, 255) / 255).permute(1, 2, 0)
        axes[i, 0].imshow(rgb.numpy())
        attn = last[i].mean(0)  # heads averaged, (N, N)
        for j, (qx, qy) in enumerate(args.queries):
            col, row = int(qx * hw[1]), int(qy * hw[0])
            axes[i, 0].plot((col + 0.5) * p, (row + 0.5) * p, 'o', color='red')
            query = prefix + row * hw[1] + col
            heat = attn[query, prefix:].reshape(hw)
            axes[i, j + 1].imshow(rgb.numpy())
            axes[i, j + 1].imshow(upsample_map(heat, size).numpy(),
                                  cmap='inferno', alpha=0.7)
            axes[i, j + 1].set_title(f'query ({qx:.2f}, {qy:.2f})')
    for ax in axes.flat:
        ax.axis('off')
    fig.tight_layout()
    save_figure(fig, osp.join(args.out_dir, 'attention_queries.png'),
                dpi=80)
    print(f'wrote {stem}.csv, .json, .png and attention_queries.png '
          f'({len(paths)} images at {size}px)')


if __name__ == '__main__':
    main()
