# End-to-end fine-tuning on ImageNet-1K (MAE recipe) with an APE ViT-S/16
# (learnable absolute position embedding, no RoPE) instead of RoPE-Mixed.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = './vit-base-p16-rope-mixed_ft_8xb128-coslr-100e_in1k.py'

model = dict(
    backbone=dict(arch='small', rope=None, use_ape=True),
    head=dict(in_channels=384))
