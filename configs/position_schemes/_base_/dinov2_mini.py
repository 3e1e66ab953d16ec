# DINOv2 on the mini images (../../dinov2/dinov2_vit-tiny_mini.py: 64px
# global and 32px local crops, 8px patches: 8 x 8 and 4 x 4 grids) with a
# RoPE-Mixed ViT; each scheme's config replaces model.backbone.rope. The APE
# stays (mmpos' DINOv2 adds the backbone's APE itself: RoPE + APE).
# _delete_: the base backbone has no RoPE (rope=None).
_base_ = ['../../dinov2/dinov2_vit-tiny_mini.py']

model = dict(backbone=dict(rope=dict(_delete_=True, type='mixed')))
