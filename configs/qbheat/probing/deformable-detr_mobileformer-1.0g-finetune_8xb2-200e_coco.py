# Fine-tuning variant (QB-Heat App. B.2, Tab. 16) of
# the Deformable DETR probing of a QB-Heat Mobile-Former-1.0G: the MF-285M
# recipe (200 more epochs of the whole model, lr 1e-5 -> 1e-6 after 150)
# with the 1.0g backbone and widths, continuing from its frozen probe.
# Probe checkpoint:  --cfg-options load_from=PATH
_base_ = ['./deformable-detr_mobileformer-285m-frozen_8xb2-500e_coco.py']

model = dict(
    backbone=dict(
        arch='1.0g', frozen_stages=-1, norm_eval=False, init_cfg=None),
    neck=dict(in_channels=[96, 1440]))
load_from = ('work_dirs/deformable-detr_mobileformer-1.0g-frozen_8xb2-500e_'
             'coco/epoch_500.pth')
sync_bn = 'torch'
max_epochs, drop_epoch = 200, 150
optim_wrapper = dict(
    optimizer=dict(lr=1e-5),
    paramwise_cfg=dict(custom_keys=dict(backbone=dict(lr_mult=1.0))))
param_scheduler = [
    dict(type='MultiStepLR', begin=0, end=max_epochs, by_epoch=True,
         milestones=[drop_epoch], gamma=0.1)
]
train_cfg = dict(max_epochs=max_epochs)
