# End-to-end fine-tuning on ImageNet-1K (MAE recipe) with ViT-S/16 (384 wide)
# instead of ViT-B/16.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = './vit-base-p16-rope-mixed_ft_8xb128-coslr-100e_in1k.py'

model = dict(
    backbone=dict(arch='small'),
    head=dict(in_channels=384))
