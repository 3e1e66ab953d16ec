# Decoder probing on COCO with RetinaNet (QB-Heat Sec. 5, App. C, Tab. 14)
# and a frozen QB-Heat Mobile-Former-285M (see the model base). The paper
# gives no RetinaNet schedule: mmdet's 1x (8 GPUs x 2 images), AdamW 1e-4.
# Pretrained checkpoint (a QB-Heat pretraining checkpoint):
#   --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    'mmdet::_base_/models/retinanet_r50_fpn.py',
    './_base_/mobileformer-285m-frozen.py',
    'mmdet::_base_/datasets/coco_detection.py',
    'mmdet::_base_/schedules/schedule_1x.py',
    'mmdet::_base_/default_runtime.py',
]

optim_wrapper = dict(
    optimizer=dict(_delete_=True, type='AdamW', lr=1e-4, weight_decay=1e-4))
# RetinaNet with a frozen Mobile-Former-285M (QB-Heat Sec. 5, App. C,
# Tab. 14): only FPN + head learn. FPN takes the stride-8 and stride-16
# levels of the shared frozen backbone and adds strides 32-128 by stride-2
# convs, matching RetinaNet's anchors.
model = dict(
    backbone=dict(_delete_=True, **_base_.frozen_mobileformer),
    neck=dict(in_channels=[48, 720], start_level=0,
              num_outs=5))
# mmpos' hook: deletes old checkpoints only after the new one is complete
default_hooks = dict(checkpoint=dict(type='mmpretrain.IntactCheckpointHook'))
