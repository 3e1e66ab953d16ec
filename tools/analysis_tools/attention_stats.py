"""Attention distance and entropy per layer across input resolutions
(RoPE-ViT Figs. 2-3).

    python tools/analysis_tools/attention_stats.py CONFIG [--checkpoint CKPT]
        --img-dir DIR [--resolutions 224 320 384] [--num-images 16]
        [--out-dir DIR]

CONFIG's ``model.backbone`` (a RoPEVisionTransformer) is built and loaded
from CKPT (full-model ``backbone.*`` keys or a bare backbone state dict).
Writes ``attention_stats.csv`` / ``.json`` (resolution, layer, mean over
heads and images of the attention distance in pixels and the entropy in
nats) and ``attention_stats.png`` (one line per resolution).
"""
import argparse
import os
import os.path as osp

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from mmpos.analysis.attention import (attention_backbone, list_images,  # noqa
                                      load_images, record_attention,
                                      resize_for, write_rows)
from mmpos.analysis.metrics import attention_distance, attention_entropy  # noqa
from mmpos.analysis.pictures import save_figure  # noqa: E402
from mmpos.guardrails.cli import cli_main  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config')
    parser.add_argument('--checkpoint')
    parser.add_argument('--img-dir', required=True)
    parser.add_argument('--resolutions', type=int, nargs='+',
                        default=[160, 224, 320, 384])
    parser.add_argument('--num-images', type=int, default=16)
    parser.add_argument('--batch-size', type=int, default=8)
    parser.add_argument('--out-dir', default='work_dirs/analysis')
    return parser.parse_args(argv)


def layer_stats(backbone, paths, size, batch_size):
    """Per-layer (distance px, entropy) averaged over heads and images."""
    sums = None
    hw = (size // backbone.patch_size[0], size // backbone.patch_size[1])
    prefix = backbone.num_extra_tokens
    for start in range(0, len(paths), batch_size):
        chunk = paths[start:start + batch_size]
        maps = record_attention(backbone, load_images(chunk, size))
        stats = torch.stack([
            torch.stack((attention_distance(a, hw, prefix).mean() *
                         backbone.patch_size[0],
                         attention_entropy(a, prefix).mean())) for a in maps
        ]) * len(chunk)
        sums = stats if sums is None else sums + stats
    return (sums / len(paths)).tolist()


@cli_main('attention_stats.py')
def main(argv=None):
    args = parse_args(argv)
    backbone = attention_backbone(args.config, args.checkpoint)
    paths = list_images(args.img_dir, args.num_images)
    os.makedirs(args.out_dir, exist_ok=True)
    rows = []
    for res in args.resolutions:
        size = resize_for(backbone, res)
        for layer, (dist, ent) in enumerate(
                layer_stats(backbone, paths, size, args.batch_size)):
            rows.append(dict(resolution=size, layer=layer,
                             distance_px=dist, entropy=ent))
    stem = osp.join(args.out_dir, 'attention_stats')
    write_rows(stem, rows, config=args.config, checkpoint=args.checkpoint,
               num_images=len(paths))
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for size in dict.fromkeys(r['resolution'] for r in rows):
        sel = [r for r in rows if r['resolution'] == size]
        layers = [r['layer'] + 1 for r in sel]
        axes[0].plot(layers, [r['distance_px'] for r in sel], 'o-',
                     label=f'{size}px')
        axes[1].plot(layers, [r['entropy'] for r in sel], 'o-',
                     label=f'{size}px')
    for ax, title in zip(axes, ('attention distance (px)',
                                'attention entropy (nats)')):
        ax.set_xlabel('layer')
        ax.set_title(title)
        ax.legend()
    fig.tight_layout()
    save_figure(fig, stem + '.png', dpi=100)
    print(f'wrote {stem}.csv, .json, .png ({len(paths)} images)')


if __name__ == '__main__':
    main()
