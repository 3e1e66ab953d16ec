# The demo Semantic FPN on mini-ADE with the backbone of
# ../icpf_vit-tiny-dinov3pos_mini.py: the 4-block mini ViT with APE (the
# positional field, exported for the 16 x 16 grid of the 128 px crops by
# tools/model_converters/mmpos2backbone.py --config THIS) and DINOv3's
# positions (normalised patch-centre RoPE, rotate-half, 4 registers,
# LayerScale; no coordinate rescale downstream, see
# ../../_base_/models/rope-vit_dinov3-positions.py). Checkpoint:
# --cfg-options model.backbone.init_cfg.checkpoint=PATH (the converted one).
_base_ = [
    '../../demo/fpn_vit-tiny-rope-mixed_mini-ade.py',
    '../../_base_/models/rope-vit_dinov3-positions.py',
]

model = dict(backbone=dict(use_ape=True, img_size=128,
                           **_base_.dinov3_transfer_positions))
