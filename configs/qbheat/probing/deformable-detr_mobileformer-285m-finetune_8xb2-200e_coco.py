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

model = dict(backbone=_base_.unfrozen_mobileformer)
load_from = ('work_dirs/deformable-detr_mobileformer-285m-frozen_8xb2-500e_'
             'coco/epoch_500.pth')
sync_bn = 'torch'
max_epochs, drop_epoch = _base_.finetune_epochs
optim_wrapper = _base_.finetune_optim_wrapper
param_scheduler = _base_.finetune_param_scheduler
train_cfg = dict(max_epochs=max_epochs)
