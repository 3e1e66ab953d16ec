# DropPos on the mini images (../../droppos/droppos_vit-tiny_mini.py: 32px
# images, 8px patches, a 4 x 4 grid) on the RoPE-Mixed ViT without APE; each
# scheme's config replaces model.backbone.rope.
_base_ = ['../../droppos/droppos_vit-tiny_mini.py']

model = dict(
    backbone=dict(
        _delete_=True,
        type='RoPEVisionTransformer',
        arch=_base_.mini_vit_arch,
        img_size=_base_.img_size,
        patch_size=_base_.patch_size,
        rope=dict(type='mixed'),
        use_ape=False,
        out_type='raw'))
