# Cascade Mask R-CNN MLN+FPN 1x (CR2PQ Table 1) with an APE ViT-S/16
# (learnable absolute position embedding, no RoPE) instead of RoPE-Mixed.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = './cascade-mask-rcnn_vit-base-p16-rope-mixed_mln-fpn_8xb2-1x_coco.py'

model = dict(
    backbone=dict(arch='small', rope=None, use_ape=True),
    neck=[
        dict(type='mmpretrain.DeconvMultiLevelNeck', in_channels=384),
        dict(type='FPN', in_channels=[384] * 4, out_channels=256, num_outs=5)
    ])
