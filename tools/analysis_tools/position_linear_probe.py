"""Linear position probing of a frozen backbone (DropPos §4.3, Table 7).

The backbone of CONFIG (``model.backbone``: an mmpretrain ViT / MAEViT or an
mmpos RoPEVisionTransformer with a class token) is loaded from CHECKPOINT
(``backbone.*`` of a training checkpoint or a bare backbone state dict) and
frozen; 75% of the patches lose their position embedding and a linear head
learns to classify their positions (see :mod:`mmpos.analysis.position_probe`
for the protocol and the choices). The head trains on the first
``--train-images`` images of ``--images`` and is scored on the next
``--val-images`` (disjoint).

    python tools/analysis_tools/position_linear_probe.py CONFIG CHECKPOINT \\
        --images data/imagenet/val [--img-size 224] [--iters 2000] \\
        [--train-images 40000] [--val-images 10000] [--out probe.json]

Run it on a pretrained and on a fine-tuned checkpoint for Table 7's
"Pre-trained" and "Fine-tuned" columns.
"""
import argparse
import json
import random
import sys

import torch

from mmpos.checkpoint import write_atomically
from mmpos.guardrails.cli import cli_main


def build_probe(config: str, checkpoint: str, img_size: int,
                pos_mask_ratio: float):
    from mmengine.config import Config

    import mmpos  # noqa: F401
    from mmpos.analysis.position_probe import (LinearPositionProbe,
                                               token_vit_config)
    from mmpos.models.selfsup.droppos import DropPos
    from mmpos.checkpoint import load_pretrained

    cfg = Config.fromfile(config)
    if 'model' not in cfg or 'backbone' not in cfg.model:
        raise KeyError(f'{config}: no model.backbone to probe')
    backbone = dict(cfg.model.backbone)
    backbone['type'] = backbone['type'].split('.')[-1]
    backbone.pop('init_cfg', None)
    backbone['img_size'] = img_size
    encoder = DropPos(backbone=token_vit_config(backbone), head=None)
    load_pretrained(encoder.backbone, checkpoint, prefix='backbone.',
                    resizable=('pos_embed', ))
    patch = encoder.backbone.patch_embed.projection.kernel_size[0]
    if img_size % patch:
        raise ValueError(f'--img-size {img_size} is not a multiple of the '
                         f'patch size {patch}')
    return LinearPositionProbe(encoder, (img_size // patch)**2,
                               pos_mask_ratio)


@cli_main('position_linear_probe.py')
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    parser.add_argument('--images', required=True,
                        help='folder of images (searched recursively)')
    parser.add_argument('--img-size', type=int, default=224)
    parser.add_argument('--train-images', type=int, default=40000)
    parser.add_argument('--val-images', type=int, default=10000)
    parser.add_argument('--iters', type=int, default=2000)
    parser.add_argument('--batch-size', type=int, default=64)
    parser.add_argument('--lr', type=float, default=0.1)
    parser.add_argument('--pos-mask-ratio', type=float, default=0.75)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--out', help='write the result as JSON')
    args = parser.parse_args(argv)

    from mmpos.analysis.attention import list_images, load_images
    from mmpos.analysis.position_probe import (evaluate_position_probe,
                                               train_position_probe)

    torch.manual_seed(args.seed)
    paths = list_images(args.images)
    need = args.train_images + args.val_images
    if len(paths) < 2:
        raise SystemExit(f'{args.images}: {len(paths)} image(s); the probe '
                         f'needs separate training and validation images')
    if len(paths) < need:
        print(f'{args.images}: {len(paths)} images, fewer than '
              f'{need}; splitting them 80/20', file=sys.stderr)
        cut = max(1, int(0.8 * len(paths)))
        train_paths, val_paths = paths[:cut], paths[cut:]
    else:
        train_paths = paths[:args.train_images]
        val_paths = paths[args.train_images:need]

    probe = build_probe(args.config, args.checkpoint, args.img_size,
                        args.pos_mask_ratio)
    rng = random.Random(args.seed)

    def train_batches():
        while True:
            yield load_images(rng.sample(train_paths, min(
                args.batch_size, len(train_paths))), args.img_size)

    def val_batches():
        for i in range(0, len(val_paths), args.batch_size):
            yield load_images(val_paths[i:i + args.batch_size],
                              args.img_size)

    losses = train_position_probe(probe, train_batches(), args.iters,
                                  lr=args.lr)
    num_positions = probe.fc.out_features
    result = dict(
        config=args.config,
        checkpoint=args.checkpoint,
        num_positions=num_positions,
        pos_mask_ratio=args.pos_mask_ratio,
        train_images=len(train_paths),
        val_images=len(val_paths),
        iters=args.iters,
        first_loss=losses[0],
        last_loss=sum(losses[-10:]) / len(losses[-10:]),
        val_top1=evaluate_position_probe(probe, val_batches(), args.seed),
        chance=100. / num_positions)
    print(f'position probe top-1 {result["val_top1"]:.2f}% on '
          f'{len(val_paths)} held-out images (chance '
          f'{result["chance"]:.2f}%, {num_positions} positions)')
    if args.out:
        write_atomically(json.dumps(result, indent=2).encode(), args.out)
    return result


if __name__ == '__main__':
    main()
