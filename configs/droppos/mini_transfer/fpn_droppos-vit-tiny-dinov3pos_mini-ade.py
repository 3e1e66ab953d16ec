# The demo Semantic FPN on mini-ADE with the backbone of
# ../droppos_vit-tiny-dinov3pos_mini.py: the 4-block mini ViT without APE
# and DINOv3's positions (normalised patch-centre RoPE, rotate-half, 4
# registers, LayerScale; no coordinate rescale downstream, see
# ../../_base_/models/rope-vit_dinov3-positions.py). Checkpoint: --cfg-options
# model.backbone.init_cfg.checkpoint=PATH (the pretraining checkpoint or
# its backbone from tools/model_converters/mmpos2backbone.py).
_base_ = [
    '../../demo/fpn_vit-tiny-rope-mixed_mini-ade.py',
    '../../_base_/models/rope-vit_dinov3-positions.py',
]

model = dict(backbone=_base_.dinov3_transfer_positions)
