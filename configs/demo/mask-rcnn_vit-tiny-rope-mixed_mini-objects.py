# The demo's detection transfer: the tiny RoPE-Mixed ViT + Mask R-CNN on
# mini-objects (8 materials, classes told apart by texture only), label-
# scarce: 256 training images, 600 iterations (batch 4, about 9 passes),
# AdamW lr 1e-3, scored by CocoMetric on 32 validation images (the
# calibration: docs/notes/demo_calibration.md). RPN anchors of 8..128 px
# (scale 2 at strides 4..64) for 64px images with 6..42 px objects.
# Pretrained backbone: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = ['./mask-rcnn_vit-tiny-rope-mixed_mini-coco.py']
# mini-objects written by tools/misc/make_mini_data.py (--which objects):
# mini-COCO's layout and pipelines at the generator's native 64px, 8
# material classes (MiniObjectsDataset's own metainfo).
data_root = 'data/mini/objects/'
image_scale = (64, 64)
train_pipeline = [
    dict(step, scale=image_scale) if step['type'] == 'Resize' else step
    for step in _base_.train_pipeline
]
test_pipeline = [
    dict(step, scale=image_scale) if step['type'] == 'Resize' else step
    for step in _base_.test_pipeline
]
mini_objects_dataset = dict(
    type='MiniObjectsDataset', data_root=data_root, metainfo=None)
# InfiniteSampler: a small split ends an epoch every few iterations, and
# mmengine sleeps 2 s at every restart of the dataloader.
train_dataloader = dict(
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(
        **mini_objects_dataset,
        filter_cfg=dict(filter_empty_gt=True, min_size=2),
        pipeline=train_pipeline))
val_dataloader = dict(
    dataset=dict(**mini_objects_dataset, pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=data_root + 'annotations/instances_val2017.json')
test_evaluator = val_evaluator
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
