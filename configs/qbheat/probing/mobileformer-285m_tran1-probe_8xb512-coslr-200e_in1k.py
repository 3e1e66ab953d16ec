# tran-1 decoder probing on ImageNet-1K (QB-Heat Sec. 5, App. B.1, Tab. 11):
# the frozen Mobile-Former-285M -> one transformer block of width 192 on the
# 14x14 map -> pooling -> dropout 0.1 -> linear classifier. AdamW, lr
# 5e-4 x 4096 / 256, wd 0.1, batch 4096 (8 GPUs x 512), cosine decay after
# 10 warm-up epochs, 200 epochs, RandAug (9, 0.5), label smoothing 0.1, no
# random erasing (0.25 for MF-3.7G).
# Pretrained checkpoint (QB-Heat pretraining; its `backbone.` weights):
#   --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    'mmpretrain::_base_/datasets/imagenet_bs64_swin_224.py',
    'mmpretrain::_base_/default_runtime.py',
    './_base_/mobileformer-285m-frozen_cls.py',
]

# the backbone and its checkpoint: ./_base_/mobileformer-285m-frozen_cls.py
model = dict(
    head=dict(
        type='TransformerClsHead',
        num_classes=1000,
        in_channels=720,
        embed_dims=192,
        num_layers=1,
        dropout=0.1,
        loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1,
                  mode='original')))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=224, backend='pillow',
         interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='RandAugment', policies='timm_increasing', num_policies=2,
         total_level=10, magnitude_level=9, magnitude_std=0.5,
         hparams=dict(pad_val=[104, 116, 124], interpolation='bicubic')),
    dict(type='RandomErasing', erase_prob=0., mode='rand',
         min_area_ratio=0.02, max_area_ratio=1 / 3,
         fill_color=[103.53, 116.28, 123.675],
         fill_std=[57.375, 57.12, 58.395]),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=512, num_workers=8, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(batch_size=256, num_workers=8)
test_dataloader = val_dataloader

max_epochs, warmup_epochs = 200, 10
optim_wrapper = dict(
    optimizer=dict(type='AdamW', lr=5e-4 * 4096 / 256, betas=(0.9, 0.999),
                   weight_decay=0.1),
    paramwise_cfg=dict(norm_decay_mult=0., bias_decay_mult=0.))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, begin=0,
         end=warmup_epochs, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', T_max=max_epochs - warmup_epochs,
         eta_min=1e-6, by_epoch=True, begin=warmup_epochs, end=max_epochs,
         convert_to_iter_based=True)
]
train_cfg = dict(max_epochs=max_epochs)
# Validation and a checkpoint (the last three kept) every 10 epochs.
default_hooks = dict(
    checkpoint=dict(type='IntactCheckpointHook', interval=10, max_keep_ckpts=3))
