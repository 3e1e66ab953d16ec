"""Convert a timm ``VisionTransformer`` / ``Eva`` checkpoint into an
mmpretrain classifier checkpoint for ``RoPEVisionTransformer``.

    python tools/model_converters/timm2mmpos.py SRC DST
        [--rope-type auto|none|axial|mixed|dinov3] [--num-heads N]
        [--no-head] [--drop-unexpected] [--force]

SRC (a timm ``state_dict``, e.g. ``pytorch_model.bin``) is read with
``mmpos.checkpoint.read_checkpoint`` (``weights_only=True``); one that is
not a ViT (no ``patch_embed.proj.weight`` and ``blocks.<i>.*``) is refused.
Sources: timm's plain ViTs and the naver RoPE ViTs
(``vit_*_patch16_rope{,_mixed}{,_ape}_224``, timm's ``Eva``), timm's DINOv3
ViTs (``vit_*_patch16_dinov3{,_qkvb}``, ``--rope-type
dinov3``: the axial RoPE options of
``mmpos.converters.DINOV3_BACKBONE``) and timm's DINOv2 with
registers (``vit_*_patch14_reg4_dinov2``, ``--rope-type none``).
``pos_embed`` with or without the class-token slot is accepted (timm's
``no_embed_class`` models have none); ``ls1/ls2.gamma`` and ``gamma_1/2``
layer scale, ``norm_pre`` and ``fc_norm`` (average-pool models) are mapped;
RoPE-Mixed's ``rope.freqs`` ``(2, depth, heads, D/2)`` is split per block;
register tokens ``reg_token`` become ``register_tokens``; EVA's
``q_bias`` / ``v_bias`` become ``qkv.bias`` with a zero key bias.

``--rope-type auto`` (default) reads RoPE-Mixed from ``rope.freqs`` and
refuses to guess otherwise: timm's RoPE-Axial models store no RoPE key, so
their checkpoints look like plain APE ViTs (and DINOv3's like
register-token ViTs without APE); say ``axial``, ``dinov3`` or ``none``.
``--rope-type axial|mixed`` on a plain APE ViT adds RoPE to it (mixed
frequencies are then reported missing and initialised by the model). Keys
with no place in the model (q/k norms, ...) are refused unless
``--drop-unexpected``. An existing DST is kept unless ``--force``.
"""
from mmpos.converters import (
    convert_timm_vit, infer_vit_config, require_vit, resolve_rope_type)
from mmpos.converters.command import vit_converter_main
from mmpos.guardrails.cli import cli_main


def convert(source, args):
    """``(state_dict, model config)`` of the timm state dict ``source``."""
    require_vit(source, args.src)
    rope_type = resolve_rope_type(args.rope_type, 'rope.freqs' in source,
                                  args.src)
    state_dict = convert_timm_vit(source)
    return state_dict, infer_vit_config(state_dict, args.num_heads,
                                        rope_type)


@cli_main('timm2mmpos.py')
def main(argv=None):
    vit_converter_main(
        argv, __doc__, 'timm2mmpos', src_help='timm checkpoint',
        rope_type=dict(choices=['auto', 'none', 'axial', 'mixed', 'dinov3'],
                       default='auto',
                       help='RoPE of the target model; auto: mixed if the '
                       'checkpoint has rope.freqs, else an error (RoPE-Axial '
                       'and APE checkpoints have the same keys)'),
        keys=('state_dict', 'model'), convert=convert)


if __name__ == '__main__':
    main()
