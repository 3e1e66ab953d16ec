"""Convert a timm ``VisionTransformer`` checkpoint into an mmpretrain
classifier checkpoint for ``RoPEVisionTransformer``.

    python tools/model_converters/timm2mmpos.py SRC DST
        [--rope-type none|axial|mixed] [--num-heads N] [--no-head]
        [--drop-unexpected] [--force]

SRC (a timm ``state_dict``, e.g. ``pytorch_model.bin``) is loaded with
``torch.load(weights_only=True)``. ``pos_embed`` with or without the
class-token slot is accepted (timm's ``no_embed_class`` models have none);
``ls1/ls2.gamma`` layer scale, ``norm_pre`` and ``fc_norm`` (average-pool
models) are mapped. ``--rope-type axial|mixed`` adds RoPE to the converted
APE model (its mixed frequencies are then reported missing and initialised
by the model). Keys with no place in the model (register tokens, q/k norms)
are refused unless ``--drop-unexpected``. An existing DST is kept unless
``--force``.
"""
import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(
    __file__)))))

from mmpos.utils.checkpoint_convert import (  # noqa: E402
    ConversionError, check_and_save, convert_timm_vit, infer_vit_config,
    load_weights, unwrap_state_dict)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('src', help='timm checkpoint')
    parser.add_argument('dst', help='output checkpoint')
    parser.add_argument('--rope-type', choices=['none', 'axial', 'mixed'],
                        default='none', help='RoPE of the target model')
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
        source = unwrap_state_dict(load_weights(args.src),
                                   ('state_dict', 'model'))
        if args.no_head:
            source = {k: v for k, v in source.items()
                      if not k.startswith('head.')}
        state_dict = convert_timm_vit(source)
        model = infer_vit_config(state_dict, args.num_heads, args.rope_type)
        check_and_save(
            state_dict, model, args.dst,
            meta=dict(source=osp.abspath(args.src), converter='timm2mmpos',
                      model=model),
            force=args.force, drop_unexpected=args.drop_unexpected)
    except (ConversionError, OSError, ValueError, KeyError) as err:
        parser.exit(1, f'{parser.prog}: error: {err}\n')


if __name__ == '__main__':
    main()
