# Frozen-backbone RetinaNet probing on the mini COCO (CPU):
# the COCO probing model (frozen Mobile-Former-285M + FPN + RetinaNet head)
# with a narrower FPN/head, 128^2 images, 2 epochs, scored by the real
# CocoMetric (bbox). Checkpoint:
#   --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    'mmdet::_base_/models/retinanet_r50_fpn.py',
    './_base_/mobileformer-285m-frozen.py',
    '../../_base_/datasets/mini_coco_instance.py',
    'mmdet::_base_/schedules/schedule_1x.py',
    'mmdet::_base_/default_runtime.py',
]

# score_thr=0: after 2 epochs from the focal-loss prior (p=0.01) a frozen
# random or mini-pretrained encoder may score every box below RetinaNet's
# 0.05, and CocoMetric then reports nothing; keeping the top boxes makes the
# mini run always produce an AP (low, but measured).
model = dict(
    backbone=dict(_delete_=True, **_base_.frozen_mobileformer),
    neck=dict(in_channels=[48, 720], start_level=0,
              num_outs=5, out_channels=64),
    bbox_head=dict(num_classes=3, in_channels=64, feat_channels=64,
                   stacked_convs=2),
    test_cfg=dict(score_thr=0.0))
val_evaluator = dict(metric='bbox')
test_evaluator = val_evaluator
max_epochs = 2
train_cfg = dict(max_epochs=max_epochs, val_interval=max_epochs)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0,
         end=5),
]
optim_wrapper = dict(
    optimizer=dict(_delete_=True, type='AdamW', lr=1e-3, weight_decay=1e-4))
default_hooks = dict(
    logger=dict(interval=5),
    checkpoint=dict(type='mmpretrain.IntactCheckpointHook'))
