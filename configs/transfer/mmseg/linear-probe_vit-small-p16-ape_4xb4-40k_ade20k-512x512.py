# The linear segmentation probe with a frozen APE ViT-S/16 (learnable
# absolute position embedding, no RoPE) instead of RoPE-Mixed.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = './linear-probe_vit-base-p16-rope-mixed_4xb4-40k_ade20k-512x512.py'

model = dict(
    backbone=dict(arch='small', rope=None, use_ape=True),
    decode_head=dict(in_channels=384, channels=384))
