# QB-Heat on the mini unlabeled images (CPU): the ImageNet recipe shrunk -
# a narrow Mobile-Former with the 285M layout (12 blocks, 6 tokens,
# stride-16 last stage; widths about 1/2, tokens 64-d), 128^2 crops
# (quarter 64^2 -> 4x4 features, centre sub-blocks 2x2), a 128-d predictor
# with 2 explicit models per scale, corner + centre mixed, a 2-block 128-d
# decoder, batch 16, 120 iterations at a higher lr; block layout,
# quarter-to-whole prediction and losses unchanged.
_base_ = [
    './_base_/qbheat_mobileformer-285m.py',
    '../_base_/default_runtime_pretrain.py',
    '../_base_/schedules/pretrain_mini.py',
    '../_base_/datasets/mini_unlabeled.py',
]

img_size = 128
mini_mobile_former = dict(
    stem=8, lite=16, token_dims=64, last=192,
    blocks=[(48, 16), (48, 16), (96, 24), (72, 24), (72, 24), (144, 32),
            (128, 32), (128, 32), (192, 48), (192, 48), (192, 48)])
model = dict(
    backbone=dict(arch=dict(_delete_=True, **mini_mobile_former)),
    neck=dict(in_channels=192, embed_dims=128),
    head=dict(in_channels=128, num_layers=2, num_heads=4))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=img_size,
         crop_ratio_range=(0.5, 1.0), backend='pillow',
         interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackInputs'),
]
train_dataloader = dict(batch_size=16, dataset=dict(pipeline=train_pipeline))

max_iters = 120
optim_wrapper = dict(
    optimizer=dict(lr=2e-3, betas=(0.9, 0.95)), clip_grad=dict(max_norm=5.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0,
         end=10),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=False, begin=10,
         end=max_iters),
]
train_cfg = dict(max_iters=max_iters)
default_hooks = dict(
    _base_.pretrain_mini_hooks,
    logger=dict(type='LoggerHook', interval=10),
    checkpoint=dict(type='IntactCheckpointHook', by_epoch=False,
                    interval=max_iters, max_keep_ckpts=1),
    # the probes' input size: Mobile-Former has no img_size
    online_probe=dict(_base_.pretrain_mini_hooks.online_probe,
                      img_size=img_size),
    health_monitor=dict(_base_.pretrain_mini_hooks.health_monitor,
                        img_size=img_size))
