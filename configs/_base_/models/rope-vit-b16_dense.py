# The ViT-B/16 that every dense-prediction config starts from: RoPE-Mixed, no
# APE. Model files splice it in with `dict(_delete_=True, **_base_.vit_backbone)`;
# leaf configs switch to APE with `rope_type='none', use_ape=True`.
custom_imports = dict(imports=['mmpos'], allow_failed_imports=False)
vit_backbone = dict(
    type='mmpretrain.RoPEVisionTransformer',
    arch='base',
    patch_size=16,
    rope_type='mixed',
    use_ape=False,
    drop_path_rate=0.1,
    out_type='featmap')
