# Demo / test config: a tiny RoPE-Mixed ViT + ViTDet-style Mask R-CNN (global
# attention, simple feature pyramid) trained from scratch on mini-COCO for a
# few hundred iterations on CPU, scored by CocoMetric (heads: see the base;
# the windowed demo uses ViTDet's LayerNorm heads).
_base_ = [
    './_base_/mask-rcnn_vit-tiny-rope-mixed.py',
    '../_base_/datasets/mini_coco_instance.py',
    '../_base_/schedules/mmdet_mini_300it.py',
]
model = dict(
    roi_head=dict(bbox_head=dict(num_classes=3), mask_head=dict(num_classes=3)))
