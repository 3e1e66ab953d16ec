# DINOv2 (iBOT + KoLeo + Sinkhorn-Knopp) on the mini unlabeled images (CPU).
# vs the ImageNet configs (dinov2_vit-*-p16_*_in1k.py): 4 blocks of width
# 96, patch 8, 2 global 64px + 2 local 32px crops instead of ViT-S/B/16 at
# 224 / 96px with 8 local crops (the same 8 x 8 token grid as the transfer
# backbone); 256 prototypes instead of 65536 (a count the mini batch can
# fill); batch 8 and the mini schedule instead of 100 epochs.
_base_ = [
    '../_base_/default_runtime_pretrain.py',
    '../_base_/schedules/pretrain_mini.py',
    '../_base_/datasets/mini_unlabeled.py',
]

global_size, local_size, num_local_crops = 64, 32, 2
out_dim = 256

model = dict(
    type='DINOv2',
    backbone=dict(
        type='RoPEVisionTransformer',
        arch=dict(
            embed_dims=96, num_layers=4, num_heads=3,
            feedforward_channels=384),
        img_size=global_size,
        patch_size=8,
        rope=None,
        use_ape=True,
        out_type='raw',
        drop_path_rate=0.1),
    # separate [CLS] and patch heads of the same shape
    **{name: dict(type='DINOProjectionHead', in_channels=96,
                  out_channels=out_dim, hidden_channels=256,
                  bottleneck_channels=64)
       for name in ('head', 'patch_head')},
    centering=dict(type='TeacherCentering', mode='sinkhorn'),
    teacher_temp=0.04,
    teacher_momentum=0.992,
    mask_ratio_range=(0.1, 0.5),  # on 50% of the images (mask_sample_prob)
    data_preprocessor=dict(
        type='SelfSupDataPreprocessor',
        mean=[123.675, 116.28, 103.53],
        std=[58.395, 57.12, 57.375],
        to_rgb=True))

# DINO colour augmentation, shared by the global and local views (hue jitter
# off: mmcv 2.1.0's adjust_hue overflows with numpy 2).
color_aug = [
    dict(
        type='RandomApply',
        transforms=[
            dict(
                type='ColorJitter',
                brightness=0.4,
                contrast=0.4,
                saturation=0.2,
                hue=0.)
        ],
        prob=0.8),
    dict(
        type='RandomGrayscale',
        prob=0.2,
        keep_channels=True,
        channel_weights=(0.114, 0.587, 0.2989)),
    dict(
        type='GaussianBlur',
        magnitude_range=(0.1, 2.0),
        magnitude_std='inf',
        prob=0.5),
]
# Global (32-100% of the image) and local (5-32%) crops.
global_view, local_view = (
    [dict(type='RandomResizedCrop', scale=scale, crop_ratio_range=ratios,
          backend='pillow'),
     dict(type='RandomFlip', prob=0.5)] + color_aug
    for scale, ratios in [(global_size, (0.32, 1.)),
                          (local_size, (0.05, 0.32))])
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='MultiView',
        num_views=[2, num_local_crops],
        transforms=[global_view, local_view]),
    dict(type='PackInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))

# Schedules (Table 6, shortened): the mini lr warm-up + cosine, weight decay
# 0.04 -> 0.4 cosine (ratio, so no-decay groups stay 0), teacher momentum
# 0.992 -> 1 cosine inside the model (CosineEMA), teacher temperature 0.04.
optim_wrapper = dict(optimizer=dict(weight_decay=0.04))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0,
         end=10),
    dict(type='CosineAnnealingLR', eta_min=1e-6, by_epoch=False, begin=10,
         end=60),
    dict(type='CosineAnnealingParamScheduler', param_name='weight_decay',
         eta_min_ratio=10., by_epoch=False, begin=0, end=60),
]
# health_monitor: the teacher-entropy check against log(out_dim) once the
# method logs `teacher_entropy`.
default_hooks = dict(
    _base_.pretrain_mini_hooks,
    checkpoint=dict(type='IntactCheckpointHook', by_epoch=False, interval=60,
                    max_keep_ckpts=2),
    health_monitor=dict(
        type='HealthMonitorHook',
        dataset=dict(type='CustomDataset',
                     data_root='{train_data_root}/../cls', data_prefix='val'),
        interval=50,
        num_prototypes=out_dim))
custom_imports = dict(imports=['mmpos'], allow_failed_imports=False)
