# UperNet 160k with a ViT-L/16 (RoPE-ViT Table 3's ViT-L row): the ViT-B
# config with a ViT-L encoder (1024 wide, 24 blocks) whose blocks
# 8/12/16/24 feed the DeconvMultiLevelNeck (the ViT-B's 4/6/8/12 at the
# same relative depths); the optimisation recipe is the ViT-B one (the
# paper gives none of its own for ViT-L). Position schemes as in the ViT-B
# config.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = ['./upernet_vit-base-p16-rope-mixed_mln_4xb4-160k_ade20k-512x512.py']

model = dict(
    backbone=dict(arch='large', out_indices=(7, 11, 15, 23)),
    neck=dict(in_channels=1024),
    decode_head=dict(in_channels=[1024] * 4),
    auxiliary_head=dict(in_channels=1024))
