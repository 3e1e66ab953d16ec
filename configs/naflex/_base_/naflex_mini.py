# The pieces the NaFlex mini configs share (docs/user_guides/naflex.md): the
# 4-block mini RoPE-Mixed ViT of the demo (width 96, 8 px patches), the
# data preprocessor that normalises the patches of a NaFlex batch, and the
# pipeline's last steps (patchify, pack). The batches are padded by
# collate_fn=dict(type='naflex_collate').
custom_imports = dict(imports=['mmpos'], allow_failed_imports=False)

patch_size = 8
mini_vit = dict(
    type='RoPEVisionTransformer',
    arch=dict(embed_dims=96, num_layers=4, num_heads=3,
              feedforward_channels=384),
    patch_size=patch_size,
    rope=dict(type='mixed'))
naflex_preprocessor = dict(
    type='NaFlexDataPreprocessor',
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    to_rgb=True)
naflex_pack = [
    dict(type='NaFlexPatchify', patch_size=patch_size),
    dict(type='PackNaFlexInputs'),
]
