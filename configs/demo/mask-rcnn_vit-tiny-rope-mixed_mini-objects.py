# The demo's detection transfer: the tiny RoPE-Mixed ViT + Mask R-CNN on
# mini-objects (8 materials, classes told apart by texture only), label-
# scarce: 256 training images, 600 iterations (batch 4, about 9 passes),
# AdamW lr 1e-3, scored by CocoMetric on 32 validation images. Calibrated
# (README "Quick start"): with 32 images the detector memorised them
# (training acc 98%) and stayed at 1-2 AP^bb from any init. RPN anchors of
# 8..128 px (scale 2 at strides 4..64) for 64px images with 6..42 px
# objects.
# Pretrained backbone: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    './_base_/mask-rcnn_vit-tiny-rope-mixed.py',
    '../_base_/datasets/mini_objects.py',
    '../_base_/schedules/mmdet_mini_300it.py',
]
custom_imports = dict(
    imports=['mmpos', 'mmpos_harness.mini_data.datasets'],
    allow_failed_imports=False)
model = dict(
    data_preprocessor=dict(pad_size_divisor=32),
    rpn_head=dict(anchor_generator=dict(scales=[2])),
    roi_head=dict(bbox_head=dict(num_classes=8), mask_head=dict(num_classes=8)))

max_iters, warmup_iters = 600, 20
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0,
         end=warmup_iters),
    dict(type='CosineAnnealingLR', by_epoch=False, begin=warmup_iters,
         end=max_iters, T_max=max_iters - warmup_iters)
]
default_hooks = dict(checkpoint=dict(interval=max_iters))
