# DINOv2 on the mini images (../../dinov2/dinov2_vit-tiny_mini.py: 64px
# global and 32px local crops, 8px patches: 8 x 8 and 4 x 4 grids) with a
# RoPE-Mixed ViT; each scheme's config replaces model.backbone.rope. The APE
# stays (mmpos' DINOv2 adds the backbone's APE itself: RoPE + APE).
_base_ = ['../../dinov2/dinov2_vit-tiny_mini.py']

model = dict(
    backbone=dict(
        _delete_=True,
        type='RoPEVisionTransformer',
        arch=_base_.mini_vit_arch,
        img_size=_base_.global_size,
        patch_size=8,
        rope=dict(type='mixed'),
        use_ape=True,
        out_type='raw',
        drop_path_rate=0.1))
