# Fine-tuning variant (QB-Heat App. B.2, Tab. 16) of
# the Deformable DETR probing of a QB-Heat Mobile-Former-1.0G: the MF-285M
# recipe (200 more epochs of the whole model, lr 1e-5 -> 1e-6 after 150)
# with the 1.0g backbone and widths, continuing from its frozen probe.
# Probe checkpoint:  --cfg-options load_from=PATH
_base_ = ['./deformable-detr_mobileformer-285m-frozen_8xb2-500e_coco.py']

model = dict(
    backbone=dict(_base_.unfrozen_mobileformer, arch='1.0g'),
    neck=dict(in_channels=_base_.mf_channels['1.0g']))
load_from = ('work_dirs/deformable-detr_mobileformer-1.0g-frozen_8xb2-500e_'
             'coco/epoch_500.pth')
sync_bn = 'torch'
max_epochs, drop_epoch = _base_.finetune_epochs
optim_wrapper = _base_.finetune_optim_wrapper
param_scheduler = _base_.finetune_param_scheduler
train_cfg = dict(max_epochs=max_epochs)
