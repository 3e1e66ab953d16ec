# RoPE-Mixed ViT-B/16, DeiT-III stage 2: 20 epochs at 224 px from the
# stage-1 checkpoint (load_from=...): AdamW lr 1e-5, weight decay 0.1, batch
# 512 (8 x 64), drop path 0.2, cross-entropy with label smoothing 0.1,
# Mixup/CutMix, RandAugment m9-mstd0.5 (mmpretrain's DeiT-III pipeline
# without random erasing), no repeated augmentation.
_base_ = ['./vit-small-p16_rope-mixed_8xb256-400e_in1k.py']

model = dict(
    backbone=dict(arch='base', img_size=224, drop_path_rate=0.2),
    head=dict(
        in_channels=768,
        loss=dict(
            _delete_=True,
            type='LabelSmoothLoss',
            label_smooth_val=0.1,
            mode='original')))
bgr_mean = [103.53, 116.28, 123.675]
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=224, backend='pillow',
         interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='RandAugment', policies='timm_increasing', num_policies=2,
         total_level=10, magnitude_level=9, magnitude_std=0.5,
         hparams=dict(pad_val=[round(x) for x in bgr_mean],
                      interpolation='bicubic')),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=64,
    sampler=dict(_delete_=True, type='DefaultSampler', shuffle=True),
    dataset=dict(pipeline=train_pipeline))
optim_wrapper = dict(
    optimizer=dict(_delete_=True, type='AdamW', lr=1e-5, weight_decay=0.1))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.1, by_epoch=True, begin=0, end=5,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-6, by_epoch=True, begin=5,
         end=20),
]
train_cfg = dict(max_epochs=20, val_interval=1)
auto_scale_lr = dict(base_batch_size=512)
load_from = None  # the stage-1 checkpoint
