# RoPE-Mixed ViT-S/16 on ImageNet-1k with the DeiT-III 400-epoch recipe as
# the RoPE-ViT authors ran it (naver-ai/rope-vit, deit/README.md): LAMB,
# lr 4e-3 for batch 2048 (8 x 256, not rescaled), weight decay 0.03, 5
# warm-up epochs then cosine to 1e-5, 3-Augment + colour jitter 0.3 on a
# random resized crop, Mixup 0.8 / CutMix 1.0, binary cross-entropy, no
# label smoothing, no random erasing, repeated augmentation (3), drop path
# 0, LayerScale 1e-4, evaluation at 224 with crop ratio 1.0. Every other
# config in this folder inherits this one. The sigmoid loss is averaged
# over classes (loss_weight 1/1000) as torch's BCEWithLogitsLoss; the
# authors' code also thresholds the mixed targets to {0, 1}, mmpretrain
# keeps them soft.
_base_ = [
    'mmpretrain::_base_/datasets/imagenet_bs64_deit3_224.py',
    '../_base_/default_runtime_pretrain.py',
    '../_base_/schedules/vit_layer-decay_paramwise.py',
]

custom_imports = dict(imports=['mmpos'], allow_failed_imports=False)

model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='RoPEVisionTransformer',
        arch='small',
        img_size=224,
        patch_size=16,
        rope=dict(type='mixed'),
        use_ape=False,
        drop_path_rate=0.0,
        layer_scale_init_value=1e-4,
        out_type='cls_token'),
    neck=None,
    head=dict(
        type='VisionTransformerClsHead',
        num_classes=1000,
        in_channels=384,
        loss=dict(
            type='CrossEntropyLoss', use_sigmoid=True, loss_weight=1e-3)),
    train_cfg=dict(augments=[
        dict(type='Mixup', alpha=0.8),
        dict(type='CutMix', alpha=1.0)
    ]))

# 3-Augment: per image one of grayscale / solarisation / Gaussian blur
# (radius uniform in [0.1, 2]), then colour jitter.
three_augment = dict(
    type='mmcv.RandomChoice',
    transforms=[
        [dict(type='RandomGrayscale', prob=1., keep_channels=True)],
        [dict(type='Solarize', thr=128, prob=1.)],
        [dict(type='GaussianBlur', magnitude_range=(0.1, 2.), prob=1.,
              magnitude_std='inf')],
    ])
color_jitter = dict(
    type='ColorJitter', brightness=0.3, contrast=0.3, saturation=0.3)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=224, crop_ratio_range=(0.08, 1.),
         backend='pillow', interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    three_augment,
    color_jitter,
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=256,
    num_workers=8,
    sampler=dict(_delete_=True, type='RepeatAugSampler', num_repeats=3),
    dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(batch_size=128, num_workers=8)
test_dataloader = val_dataloader

optim_wrapper = dict(
    optimizer=dict(type='Lamb', lr=4e-3, weight_decay=0.03),
    paramwise_cfg={{_base_.vit_paramwise_cfg}})
param_scheduler = [
    dict(type='LinearLR', start_factor=2.5e-4, by_epoch=True, begin=0,
         end=5, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=5,
         end=400),
]
train_cfg = dict(by_epoch=True, max_epochs=400, val_interval=10)
val_cfg = dict()
test_cfg = dict()
auto_scale_lr = dict(base_batch_size=2048)
default_hooks = dict(logger=dict(interval=100))
