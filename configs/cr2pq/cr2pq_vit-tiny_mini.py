# CR2PQ on the mini unlabeled images: the 4-block ViT of the demo with
# RoPE-Axial, two 64px BYOL views (8 x 8 patches of 8 px) with their crop
# boxes, EMA teacher (tau 0.996 -> 1 as on ImageNet). About a minute of
# CPU time.
_base_ = [
    '../_base_/default_runtime_pretrain.py',
    '../_base_/datasets/mini_unlabeled.py',
    '_base_/cr2pq_vit-base-p16.py',
]
custom_imports = dict(
    imports=[
        'mmpos', 'mmpos.datasets.transforms.crop_boxes',
        'mmpos.models.selfsup.cr2pq', 'mmpos.models.necks.cr2pq_neck',
        'mmpos.models.losses.cr2pq_loss'
    ],
    allow_failed_imports=False)

size = 64
model = dict(
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=96, num_layers=4, num_heads=3,
                  feedforward_channels=384),  # mini_vit_arch
        img_size=size,
        patch_size=8),
    neck=dict(embed_dims=96, num_heads=3, out_channels=96,
              hidden_channels=256))


def byol_view(blur_prob, solarize_prob):
    return [
        dict(type='RandomResizedCropWithBox', scale=size,
             crop_ratio_range=(0.2, 1.), backend='pillow'),
        dict(type='RandomFlipWithBox', prob=0.5),
        dict(type='RandomApply',
             transforms=[dict(type='ColorJitter', brightness=0.4,
                              contrast=0.4, saturation=0.2, hue=0.)],
             prob=0.8),
        dict(type='RandomGrayscale', prob=0.2, keep_channels=True,
             channel_weights=(0.114, 0.587, 0.2989)),
        dict(type='GaussianBlur', magnitude_range=(0.1, 2.0),
             magnitude_std='inf', prob=blur_prob),
        dict(type='Solarize', thr=128, prob=solarize_prob),
    ]


train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='MultiViewWithBoxes', num_views=[1, 1],
         transforms=[byol_view(1., 0.), byol_view(0.1, 0.2)]),
    dict(type='PackInputs', algorithm_keys=['crop_boxes']),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))

max_iters, warmup_iters = 60, 10
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=5e-4, betas=(0.9, 0.999),
                   weight_decay=0.05),
    clip_grad=dict(max_norm=3.0),
    paramwise_cfg=dict(norm_decay_mult=0., bias_decay_mult=0.))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0,
         end=warmup_iters),
    dict(type='CosineAnnealingLR', eta_min=1e-6, by_epoch=False,
         begin=warmup_iters, end=max_iters),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=5),
    checkpoint=dict(type='CheckpointHook', by_epoch=False,
                    interval=max_iters, max_keep_ckpts=1))
log_processor = dict(by_epoch=False)
