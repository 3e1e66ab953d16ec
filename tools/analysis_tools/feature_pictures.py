"""PCA and attention pictures of a backbone on images (PNG).

    python tools/analysis_tools/feature_pictures.py CONFIG CHECKPOINT
        IMAGE [IMAGE ...] --out-dir DIR [--sizes 224 448] [--layers -1]
        [--heads 0 1 2] [--tile 160] [--prefix backbone.] [--device cpu]

For every image ``<stem>`` writes

* ``DIR/<stem>_pca.png``: the image and, for every input size of
  ``--sizes``, the first three principal components of the last block's
  patch features as RGB (DINOv2 style), one tile each;
* ``DIR/<stem>_attention.png`` (RoPE ViTs): one row per input size and
  block of ``--layers``: the image and the class token's attention over the
  patches for each head of ``--heads``.

Each tile is ``--tile`` pixels square with a caption strip above its row
(:mod:`mmpos.analysis.pictures`).
"""
import os
import os.path as osp

from mmpos.apis.cli import backbone_parser
from mmpos.guardrails.cli import cli_main, distinct_stems
from mmpos.errors import BadInputError


def parse_args(argv=None):
    parser = backbone_parser(__doc__)
    parser.add_argument('--out-dir', required=True)
    parser.add_argument('--sizes', type=int, nargs='+', default=[224, 448])
    parser.add_argument('--layers', type=int, nargs='+', default=[-1])
    parser.add_argument('--heads', type=int, nargs='+', default=[0, 1, 2])
    parser.add_argument('--tile', type=int, default=160)
    parser.add_argument('--no-attention', action='store_true',
                        help='PCA pictures only (backbones without RoPE '
                        'attention)')
    return parser.parse_args(argv)


@cli_main('feature_pictures.py')
def main(argv=None):
    args = parse_args(argv)
    from mmpos.analysis.pictures import (attention_picture, pca_picture,
                                         save_png)
    from mmpos.apis import init_backbone, read_images
    from mmpos.apis.features import data_mean_std
    backbone = init_backbone(args.config, args.checkpoint, args.device,
                             prefix=args.prefix)
    num_layers = len(getattr(backbone, 'layers', []))
    wrong = [i for i in args.layers if not -num_layers <= i < num_layers]
    if num_layers and wrong:
        raise BadInputError(
            f'--layers {" ".join(map(str, wrong))}: the backbone has '
            f'{num_layers} blocks (indices {-num_layers}..{num_layers - 1})')
    layers = [i % num_layers if num_layers else i for i in args.layers]
    mean, std = data_mean_std(args.config)
    os.makedirs(args.out_dir, exist_ok=True)
    written = []
    stems = distinct_stems(args.images)
    for path, image in zip(args.images, read_images(args.images)):
        stem = osp.join(args.out_dir, stems[path])
        written.append(save_png(
            pca_picture(backbone, image, args.sizes, mean, std, args.tile),
            stem + '_pca.png'))
        if not args.no_attention:
            written.append(save_png(
                attention_picture(backbone, image, args.sizes, layers,
                                  args.heads, mean, std, args.tile),
                stem + '_attention.png'))
    print('written ' + ', '.join(written))


if __name__ == '__main__':
    main()
