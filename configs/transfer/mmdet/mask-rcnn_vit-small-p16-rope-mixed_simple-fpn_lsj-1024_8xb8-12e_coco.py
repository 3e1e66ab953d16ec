# ICPF B.2 Mask R-CNN (global attention), LSJ 1024, 12 epochs with ViT-S/16
# (384 wide) instead of ViT-B/16.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = './mask-rcnn_vit-base-p16-rope-mixed_simple-fpn_lsj-1024_8xb8-12e_coco.py'

model = dict(
    backbone=dict(arch='small'),
    neck=dict(in_channels=384))
optim_wrapper = dict(optimizer=dict(lr=1e-4))  # ICPF B.2 for ViT-S
