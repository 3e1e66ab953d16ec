# DropPos on the mini images with DINOv3's position scheme
# (configs/_base_/models/rope-vit_dinov3-positions.py: normalised
# patch-centre RoPE, rotate-half, coordinate rescale augmentation in
# training, 4 registers, LayerScale) on the demo's RoPE backbone without APE
# (configs/demo/droppos_vit-tiny-rope-mixed_mini.py), everything else as
# droppos_vit-tiny_mini.py. Dropped positions are unrotated tokens carrying
# the [MASK] position token; the position head classifies the patches
# (registers left out).
_base_ = [
    '../demo/droppos_vit-tiny-rope-mixed_mini.py',
    '../_base_/models/rope-vit_dinov3-positions.py',
]

model = dict(backbone=dict(**_base_.dinov3_positions))
optim_wrapper = dict(paramwise_cfg=dict(custom_keys={
    'mask_token': dict(decay_mult=0.),
    'cls_token': dict(decay_mult=0.),
    'register_tokens': dict(decay_mult=0.)}))
