"""Write the frozen features of images to ``.npy`` files.

    python tools/analysis_tools/extract_features.py CONFIG CHECKPOINT
        IMAGE [IMAGE ...] --out-dir DIR [--size H [W]] [--layers I ...]
        [--prefix backbone.] [--device cpu|cuda]

For every image ``<stem>`` (resized to ``--size``, default the backbone's
``img_size`` or 224) and every output block ``i`` (``--layers``, default
the config's ``out_indices``), writes ``DIR/<stem>.layer<i>.cls_token.npy``
``(C,)`` and ``DIR/<stem>.layer<i>.patch_tokens.npy`` ``(C, h, w)`` (those
the backbone has), float32. See :mod:`mmpos.apis.features`.
"""
import os
import os.path as osp

from mmpos.apis.cli import backbone_parser
from mmpos.guardrails.cli import cli_main, distinct_stems
from mmpos.errors import BadInputError


def parse_args(argv=None):
    parser = backbone_parser(__doc__)
    parser.add_argument('--out-dir', required=True)
    parser.add_argument('--size', type=int, nargs='+',
                        help='H [W] (default: the backbone img_size)')
    parser.add_argument('--layers', type=int, nargs='+',
                        help='out_indices (default: the config\'s)')
    return parser.parse_args(argv)


@cli_main('extract_features.py')
def main(argv=None):
    args = parse_args(argv)
    import numpy as np

    from mmpos.apis import (extract_features, init_backbone, preprocess,
                            read_images)
    from mmpos.apis.features import data_mean_std
    from mmpos.checkpoint import atomic_open
    if args.size and len(args.size) > 2:
        raise BadInputError(f'--size takes H [W], got {args.size}')
    try:
        backbone = init_backbone(args.config, args.checkpoint, args.device,
                                 out_indices=args.layers, prefix=args.prefix)
    except ValueError as err:  # the backbone refuses the out_indices
        if args.layers is None or isinstance(err, BadInputError):
            raise
        raise BadInputError(f'--layers {" ".join(map(str, args.layers))}: '
                            f'{err}') from err
    size = args.size or list(getattr(backbone, 'img_size', (224, 224)))
    size = (size[0], size[-1])
    mean, std = data_mean_std(args.config)
    os.makedirs(args.out_dir, exist_ok=True)
    written = 0
    stems = distinct_stems(args.images)
    for path, image in zip(args.images, read_images(args.images)):
        feats = extract_features(
            backbone, preprocess([image], size, mean, std).to(args.device))
        stem = stems[path]
        for layer in feats['layers']:
            for kind in ('cls_token', 'patch_tokens'):
                if layer[kind] is not None:
                    with atomic_open(osp.join(
                            args.out_dir,
                            f'{stem}.layer{layer["index"]}.{kind}.npy')) as f:
                        np.save(f, layer[kind][0].float().cpu().numpy())
                    written += 1
    print(f'{written} arrays ({size[0]}x{size[1]} input) written to '
          f'{args.out_dir}')


if __name__ == '__main__':
    main()
