# Semantic FPN 40k, ADE20K 512x512 (CR2PQ Table 2) with ViT-S/16 (384 wide)
# instead of ViT-B/16.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = './fpn_vit-base-p16-rope-mixed_mln_4xb4-40k_ade20k-512x512.py'

model = dict(
    backbone=dict(arch='small'),
    neck=[
        dict(type='mmpretrain.DeconvMultiLevelNeck', in_channels=384),
        dict(type='FPN', in_channels=[384] * 4, out_channels=256, num_outs=4)
    ])
