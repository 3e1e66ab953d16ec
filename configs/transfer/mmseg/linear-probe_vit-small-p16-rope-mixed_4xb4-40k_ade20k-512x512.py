# The linear segmentation probe with a frozen ViT-S/16 (384 wide).
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = './linear-probe_vit-base-p16-rope-mixed_4xb4-40k_ade20k-512x512.py'

model = dict(
    backbone=dict(arch='small'),
    decode_head=dict(in_channels=384, channels=384))
