# Segmenter linear decoder 160k, ADE20K 512x512 (ICPF B.3) with ViT-S/16 (384
# wide) instead of ViT-B/16.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = './segmenter-linear_vit-base-p16-rope-mixed_4xb4-160k_ade20k-512x512.py'

model = dict(
    backbone=dict(arch='small'),
    decode_head=dict(in_channels=384, channels=384))
