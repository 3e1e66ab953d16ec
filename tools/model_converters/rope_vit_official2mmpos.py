"""Convert the RoPE-ViT authors' (naver-ai/rope-vit, DeiT-III layout)
checkpoints into an mmpretrain classifier checkpoint for
``RoPEVisionTransformer``.

    python tools/model_converters/rope_vit_official2mmpos.py SRC DST
        [--rope-type auto|axial|mixed|none] [--num-heads N] [--no-head]
        [--drop-unexpected] [--force]

SRC is read with ``mmpos.checkpoint.read_checkpoint`` (``weights_only=True``:
tensors and plain containers only; the ``args`` namespace their training
script stores is allowed); a checkpoint that is not a DeiT-III-layout ViT
(no ``patch_embed.proj.weight`` and ``blocks.<i>.*``) is refused first. DST holds ``backbone.*`` and ``head.layers.head.*`` (use
``init_cfg=dict(type='Pretrained', checkpoint=DST, prefix='backbone.')`` in
mmdet/mmseg) and, under ``meta['model']``, the classifier config it was
checked against. The architecture is read from the tensor shapes; heads
default to ``embed_dims // 64``. ``--rope-type auto`` (default) reads
RoPE-Mixed from the ``freqs`` key and refuses to guess otherwise: a
RoPE-Axial checkpoint stores no RoPE key, so it has the keys of a plain
DeiT-III (APE) checkpoint; say ``--rope-type axial`` or ``none``. An existing
DST is kept unless ``--force``.
"""
from mmpos.converters import (
    convert_official_rope_vit, infer_vit_config, require_vit,
    resolve_rope_type)
from mmpos.converters.command import vit_converter_main
from mmpos.guardrails.cli import cli_main


def convert(source, args):
    """``(state_dict, model config)``: the rope type from ``freqs`` or
    ``--rope-type`` (see :func:`resolve_rope_type`), the heads from
    ``--num-heads`` or ``embed_dims // 64``. A state dict that is not a
    DeiT-III-layout ViT is refused first."""
    require_vit(source, args.src)
    rope_type = resolve_rope_type(args.rope_type, 'freqs' in source,
                                  args.src)
    embed_dims = source['cls_token'].shape[-1] \
        if 'cls_token' in source else None
    num_heads = args.num_heads or max(1, (embed_dims or 64) // 64)
    state_dict = convert_official_rope_vit(source, num_heads)
    return state_dict, infer_vit_config(state_dict, num_heads, rope_type)


@cli_main('rope_vit_official2mmpos.py')
def main(argv=None):
    vit_converter_main(
        argv, __doc__, 'rope_vit_official2mmpos',
        src_help='authors\' checkpoint (.pth / .bin)',
        rope_type=dict(
            choices=['auto', 'axial', 'mixed', 'none'], default='auto',
            help='auto: mixed if the checkpoint has `freqs`, else an error '
            '(RoPE-Axial and plain DeiT-III checkpoints have the same keys: '
            'say axial or none)'),
        keys=('model', ), convert=convert)


if __name__ == '__main__':
    main()
