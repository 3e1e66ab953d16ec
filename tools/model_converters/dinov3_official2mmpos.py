"""Convert a DINOv3 backbone checkpoint (facebookresearch/dinov3
``DinoVisionTransformer``, e.g. ``dinov3_vits16_pretrain_lvd1689m-*.pth``)
into an mmpretrain classifier checkpoint for ``RoPEVisionTransformer``.

    python tools/model_converters/dinov3_official2mmpos.py SRC DST
        [--num-heads N] [--drop-unexpected] [--force]

The model is the DINOv3 family of
``mmpos.converters.DINOV3_BACKBONE`` (axial RoPE on patch
centres normalised to [-1, 1] per axis, rotate-half layout, row coordinate
first, LayerNorm eps 1e-5) with the checkpoint's ``rope_embed.periods``
(``base`` or ``min_period`` / ``max_period``), its register
("storage") tokens and LayerScale. ``storage_tokens`` ->
``register_tokens``, ``qkv.bias`` masked by ``bias_mask``, ``mask_token``
dropped. Only the MLP-FFN, tied-norm models (ViT-S/S+/B/L) map onto
``RoPEVisionTransformer``; the others' extra keys (SwiGLU, ``cls_norm``)
are refused unless ``--drop-unexpected``. Heads default to
``embed_dims // 64``. An existing DST is kept unless ``--force``.
"""
from mmpos.converters import convert_dinov3_official, infer_vit_config
from mmpos.converters.command import vit_converter_main
from mmpos.guardrails.cli import cli_main


def convert(source, args):
    """``(state_dict, model config)`` of a DINOv3 state dict."""
    state_dict, periods = convert_dinov3_official(source)
    return state_dict, infer_vit_config(state_dict, args.num_heads,
                                        'dinov3',
                                        rope_options=dict(periods=periods))


@cli_main('dinov3_official2mmpos.py')
def main(argv=None):
    vit_converter_main(
        argv, __doc__, 'dinov3_official2mmpos',
        src_help='DINOv3 backbone checkpoint (.pth)',
        rope_type=dict(choices=['dinov3'], default='dinov3',
                       help='always dinov3 (the periods come from SRC)'),
        keys=('model', 'state_dict'), convert=convert)


if __name__ == '__main__':
    main()
