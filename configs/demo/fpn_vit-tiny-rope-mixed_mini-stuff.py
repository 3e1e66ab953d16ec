# The demo's segmentation transfer: the tiny RoPE-Mixed ViT + Semantic FPN
# on mini-stuff (8 materials, regions told apart by texture only), label-
# scarce: 256 training images, 400 iterations (batch 4, about 6 passes),
# AdamW lr 1e-3, scored by IoUMetric on 32 validation images (the
# calibration: docs/notes/demo_calibration.md).
# Pretrained backbone: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    './_base_/fpn_vit-tiny-rope-mixed.py',
    '../_base_/datasets/mini_stuff.py',
    '../_base_/schedules/mmseg_mini_300it.py',
]
model = dict(
    data_preprocessor=dict(size=(64, 64)),
    decode_head=dict(num_classes=8))

max_iters, warmup_iters = 400, 20
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0,
         end=warmup_iters),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False,
         begin=warmup_iters, end=max_iters)
]
default_hooks = dict(checkpoint=dict(interval=max_iters))
