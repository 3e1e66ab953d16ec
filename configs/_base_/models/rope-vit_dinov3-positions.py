# DINOv3's position scheme for RoPEVisionTransformer (facebookresearch/
# dinov3, timm's vit_*_patch16_dinov3): axial RoPE with periods
# 100 ** (t / (D/4)) on patch centres normalised to [-1, 1] per axis, row
# coordinate first, rotate-half channel layout, training-time coordinate
# rescale in [1/2, 2] drawn per block and per batch (the released models'
# rescale_coords=2, rope=dict(type='dinov3')'s defaults), 4 register
# tokens, LayerScale 1e-5, LayerNorm eps 1e-5. Merge into a backbone:
# backbone=dict(..., **_base_.dinov3_positions).
dinov3_positions = dict(
    # DINOv3's own training draw: a fresh rescale per block, one per batch
    rope=dict(type='dinov3'),
    num_register_tokens=4,
    layer_scale_init_value=1e-5,
    norm_cfg=dict(type='LN', eps=1e-5))
# The same scheme for a downstream (transfer) backbone: the coordinate
# rescale is a pretraining augmentation and is left out (DINOv3 evaluates
# its backbones in eval mode, where it is off); it has no weights, so
# nothing else changes for loading.
dinov3_transfer_positions = dict(
    dinov3_positions, rope=dict(type='dinov3', coords=dict(rescale=None)))
