# tran-1 decoder probing (one transformer block of width 192 + linear
# classifier) of a frozen QB-Heat Mobile-Former-285M on the mini
# classification data (CPU): the ImageNet tran-1
# config with 3 classes, 64^2 images (16 tokens), batch 16, 10 epochs of
# AdamW with cosine decay and no RandAugment/erasing, scored by
# mmpretrain's Accuracy (top-1). Checkpoint:
#   --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    './mobileformer-285m_tran1-probe_8xb512-coslr-200e_in1k.py',
    './_base_/mini-cls.py',
]

model = dict(head=dict(num_classes=3))
data_preprocessor = dict(num_classes=3)
train_dataloader = _base_.mini_cls_train_dataloader
val_dataloader = _base_.mini_cls_val_dataloader
test_dataloader = val_dataloader
val_evaluator = dict(topk=(1, ))
test_evaluator = val_evaluator

max_epochs = 10
optim_wrapper = dict(optimizer=dict(lr=1e-3))
param_scheduler = [
    dict(type='CosineAnnealingLR', T_max=max_epochs, by_epoch=True,
         begin=0, end=max_epochs, convert_to_iter_based=True)
]
train_cfg = dict(max_epochs=max_epochs, val_interval=max_epochs)
default_hooks = dict(
    logger=dict(interval=3), checkpoint=dict(interval=max_epochs))
auto_scale_lr = dict(base_batch_size=16)
randomness = dict(seed=0)
