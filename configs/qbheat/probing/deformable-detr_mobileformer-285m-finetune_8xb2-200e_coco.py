# Fine-tuning variant of the Deformable DETR probing (QB-Heat App. B.2,
# Tab. 16): "additional 200 epochs from decoder probing", encoder and
# decoder both trained with lr 1e-5, dropped to 1e-6 after 150 epochs. The
# whole model starts from the frozen-backbone probe's last checkpoint
# (`load_from`), so the backbone takes no separate initialisation. Every
# stage, token and BatchNorm trains; with 2 images per GPU the BNs are
# synchronised across GPUs (`sync_bn`). The backbone gets the full lr (the
# paper fine-tunes both at 1e-5; mmdet's Deformable DETR uses 0.1x).
# Probe checkpoint:  --cfg-options load_from=PATH
_base_ = ['./deformable-detr_mobileformer-285m-frozen_8xb2-500e_coco.py']

model = dict(
    backbone=dict(frozen_stages=-1, norm_eval=False, init_cfg=None))
load_from = ('work_dirs/deformable-detr_mobileformer-285m-frozen_8xb2-500e_'
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
