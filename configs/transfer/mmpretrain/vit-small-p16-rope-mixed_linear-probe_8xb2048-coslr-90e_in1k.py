# Linear probing on ImageNet-1K (MAE protocol) with ViT-S/16 (384 wide)
# instead of ViT-B/16.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = './vit-base-p16-rope-mixed_linear-probe_8xb2048-coslr-90e_in1k.py'

model = dict(
    backbone=dict(arch='small'),
    neck=dict(input_features=384),
    head=dict(in_channels=384))
