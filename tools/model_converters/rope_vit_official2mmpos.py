"""Convert the RoPE-ViT authors' (naver-ai/rope-vit, DeiT-III layout)
checkpoints into an mmpretrain classifier checkpoint for
``RoPEVisionTransformer``.

    python tools/model_converters/rope_vit_official2mmpos.py SRC DST
        [--rope-type auto|axial|mixed|none] [--num-heads N] [--no-head]
        [--drop-unexpected] [--force]

SRC is loaded with ``torch.load(weights_only=True)`` (tensors and plain
containers only; the ``args`` namespace their training script stores is
allowed). DST holds ``backbone.*`` and ``head.layers.head.*`` (use
``init_cfg=dict(type='Pretrained', checkpoint=DST, prefix='backbone.')`` in
mmdet/mmseg) and, under ``meta['model']``, the classifier config it was
checked against. The architecture is read from the tensor shapes; heads
default to ``embed_dims // 64``. An existing DST is kept unless ``--force``.
"""
import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(
    __file__)))))

from mmpos.utils.checkpoint_convert import (  # noqa: E402
    ConversionError, check_and_save, convert_official_rope_vit,
    infer_vit_config, load_weights, unwrap_state_dict)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('src', help='authors\' checkpoint (.pth / .bin)')
    parser.add_argument('dst', help='output checkpoint')
    parser.add_argument(
        '--rope-type', choices=['auto', 'axial', 'mixed', 'none'],
        default='auto',
        help='auto: mixed if the checkpoint has `freqs`, else axial; use '
        'none for plain DeiT-III (APE) checkpoints')
    parser.add_argument('--num-heads', type=int,
                        help='heads per block (default embed_dims // 64)')
    parser.add_argument('--no-head', action='store_true',
                        help='leave the classification head out')
    parser.add_argument('--drop-unexpected', action='store_true',
                        help='leave out keys the model has no place for')
    parser.add_argument('--force', action='store_true',
                        help='overwrite DST')
    return parser, parser.parse_args(argv)


def main(argv=None):
    parser, args = parse_args(argv)
    try:
        source = unwrap_state_dict(load_weights(args.src), ('model', ))
        if args.no_head:
            source = {k: v for k, v in source.items()
                      if not k.startswith('head.')}
        rope_type = args.rope_type
        if rope_type == 'auto':
            rope_type = 'mixed' if 'freqs' in source else 'axial'
        embed_dims = source['cls_token'].shape[-1] \
            if 'cls_token' in source else None
        num_heads = args.num_heads or max(1, (embed_dims or 64) // 64)
        state_dict = convert_official_rope_vit(source, num_heads)
        model = infer_vit_config(state_dict, num_heads, rope_type)
        check_and_save(
            state_dict, model, args.dst,
            meta=dict(source=osp.abspath(args.src),
                      converter='rope_vit_official2mmpos', model=model),
            force=args.force, drop_unexpected=args.drop_unexpected)
    except (ConversionError, OSError, ValueError, KeyError) as err:
        parser.exit(1, f'{parser.prog}: error: {err}\n')


if __name__ == '__main__':
    main()
