# Linear decoder probing on ImageNet-1K (QB-Heat Sec. 5, App. B.1, Tab. 10):
# the frozen Mobile-Former-285M (all stages, tokens, BN statistics) ->
# global average pooling -> BatchNorm without affine -> linear classifier.
# SGD, lr 0.1 x 4096 / 256, wd 0, batch 4096 (8 GPUs x 512), cosine decay
# after 10 warm-up epochs, 90 epochs, RandomResizedCrop + flip, 224^2.
# Pretrained checkpoint (QB-Heat pretraining; its `backbone.` weights):
#   --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    'mmpretrain::_base_/datasets/imagenet_bs32_pil_resize.py',
    'mmpretrain::_base_/default_runtime.py',
    './_base_/mobileformer-285m-frozen_cls.py',
]

# the backbone and its checkpoint: ./_base_/mobileformer-285m-frozen_cls.py
model = dict(
    head=dict(
        type='BNLinearClsHead',
        num_classes=1000,
        in_channels=720,
        loss=dict(type='CrossEntropyLoss', loss_weight=1.0),
        init_cfg=[dict(type='TruncNormal', layer='Linear', std=0.01)]))

train_dataloader = dict(batch_size=512, num_workers=8)
val_dataloader = dict(batch_size=256, num_workers=8)
test_dataloader = val_dataloader

max_epochs, warmup_epochs = 90, 10
optim_wrapper = dict(
    optimizer=dict(type='SGD', lr=0.1 * 4096 / 256, momentum=0.9,
                   weight_decay=0.))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-4, by_epoch=True, begin=0,
         end=warmup_epochs, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', T_max=max_epochs - warmup_epochs,
         by_epoch=True, begin=warmup_epochs, end=max_epochs,
         convert_to_iter_based=True)
]
train_cfg = dict(max_epochs=max_epochs)
# Validation and a checkpoint (the last three kept) every 10 epochs.
default_hooks = dict(
    checkpoint=dict(type='IntactCheckpointHook', interval=10, max_keep_ckpts=3))
