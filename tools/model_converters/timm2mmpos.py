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
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(
    __file__)))))

from mmpos.utils.checkpoint_convert import (  # noqa: E402
    convert_timm_vit, infer_vit_config, vit_converter_main)
from mmpos.utils.cli import cli_main  # noqa: E402


def convert(source, args):
    """``(state_dict, model config)`` of the timm state dict ``source``."""
    state_dict = convert_timm_vit(source)
    return state_dict, infer_vit_config(state_dict, args.num_heads,
                                        args.rope_type)


@cli_main('timm2mmpos.py')
def main(argv=None):
    vit_converter_main(
        argv, __doc__, 'timm2mmpos', src_help='timm checkpoint',
        rope_type=dict(choices=['none', 'axial', 'mixed'], default='none',
                       help='RoPE of the target model'),
        keys=('state_dict', 'model'), convert=convert)


if __name__ == '__main__':
    main()
