# Decoder probing on COCO with RetinaNet (QB-Heat Sec. 5, App. C, Tab. 14)
# and a frozen QB-Heat Mobile-Former-285M (see the model base). The paper
# gives no RetinaNet schedule: mmdet's 1x (8 GPUs x 2 images), AdamW 1e-4.
# Pretrained checkpoint (a QB-Heat pretraining checkpoint):
#   --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    './_base_/retinanet_mobileformer-285m-frozen.py',
    'mmdet::_base_/datasets/coco_detection.py',
    'mmdet::_base_/schedules/schedule_1x.py',
    'mmdet::_base_/default_runtime.py',
]

optim_wrapper = dict(
    optimizer=dict(_delete_=True, type='AdamW', lr=1e-4, weight_decay=1e-4))
