"""Export an mmpos RoPE ViT backbone to timm: a folder ready for a hub.

    python tools/model_converters/mmpos2timm.py SRC DST_DIR [--config CFG]
        [--prefix backbone.] [--force]

SRC is a training checkpoint, a bare backbone state dict or an
``mmpos2backbone.py`` output; its backbone is what
``mmpos.apis.load_backbone(SRC, CFG, prefix=PREFIX)`` returns: built from
``--config`` (any mmpretrain / mmdet / mmseg / pretraining config), else
from the config SRC records, as it runs outside its pretraining model
(DropPos' and MAE's masking ``MAERoPEViT`` is the plain, unmasked RoPE ViT;
an ICPF positional field is the APE of the backbone's grid), and loaded
strictly from the ``--prefix`` keys (``backbone.``; SRC without that
prefix is used as is): a key SRC lacks is refused, not left at its random
init.

DST_DIR gets timm 1.0.31's hub layout (``timm.models.save_for_hf``):
``model.safetensors``, ``config.json`` (``architecture``: the matching
timm model, ``model_args``: the sizes, registers and layer scale) and a
``README.md`` model card; nothing is uploaded.
``timm.create_model('local-dir:DST_DIR', pretrained=True)`` loads it
strictly. ``pretrained_cfg`` records the backbone's input size and the
config's normalisation (tag ``mmpos``, no license: set one before
uploading). Targets (``mmpos.converters.to_timm``): RoPE-Axial
``vit_*_patch16_rope[_ape]_224``, RoPE-Mixed
``vit_*_patch16_rope_mixed[_ape]_224``, DINOv3's RoPE
``vit_*_patch16_dinov3[_qkvb]``, no RoPE ``vit_*_patch14_reg4_dinov2``
(registers) or ``vit_*_patch16_224``. Before writing, timm's tokens are
checked against mmpos' on a random image (relative 1e-4); where they also
agree at another input size (RoPE without APE), ``model_args`` hold
``dynamic_img_size=True`` and the model takes any size. Refused with one
line: schemes timm has no model for (ComRoPE, LieRE, STRING, Spiral,
LookHere), window attention, a non-zero key bias for DINOv3's q/v biases,
tensors with no place in timm. An existing DST_DIR is kept unless
``--force``.
"""
import argparse
import os.path as osp

from mmpos.apis.features import (checkpoint_config, data_mean_std,
                                  load_backbone)
from mmpos.converters import save_timm_folder
from mmpos.converters.command import USER_ERRORS
from mmpos.guardrails.cli import cli_main


@cli_main('mmpos2timm.py')
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('src', help='mmpos checkpoint')
    parser.add_argument('dst', help='output folder (hub layout)')
    parser.add_argument('--config', help='config of the backbone (default: '
                        'the one SRC records)')
    parser.add_argument('--prefix', default='backbone.',
                        help='key prefix of the backbone in SRC')
    parser.add_argument('--force', action='store_true',
                        help='replace DST_DIR')
    args = parser.parse_args(argv)
    try:
        config = args.config or checkpoint_config(args.src)
        backbone = load_backbone(args.src, config, prefix=args.prefix)
        mean, std = data_mean_std(config)  # 0-255
        name, error, dynamic = save_timm_folder(
            backbone, args.dst, args.force,
            source=osp.basename(args.src),
            mean_std=([m / 255 for m in mean], [s / 255 for s in std]))
        sizes = ('any input size (dynamic_img_size)' if dynamic else
                 'its input size only (an APE model)')
        print(f'saved timm {name} to {args.dst} (tokens equal to mmpos\' '
              f'within {error:.1g} relative; {sizes})')
    except USER_ERRORS as err:
        parser.exit(1, f'{parser.prog}: error: {err}\n')


if __name__ == '__main__':
    main()
