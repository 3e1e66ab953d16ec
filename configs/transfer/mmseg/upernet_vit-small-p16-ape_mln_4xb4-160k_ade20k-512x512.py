# UperNet 160k, ADE20K 512x512 (CR2PQ Table 2, RoPE-ViT Table 3) with an APE
# ViT-S/16 (learnable absolute position embedding, no RoPE) instead of RoPE-
# Mixed.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = './upernet_vit-base-p16-rope-mixed_mln_4xb4-160k_ade20k-512x512.py'

model = dict(
    backbone=dict(arch='small', rope=None, use_ape=True),
    neck=dict(in_channels=384),
    decode_head=dict(in_channels=[384] * 4),
    auxiliary_head=dict(in_channels=384))
