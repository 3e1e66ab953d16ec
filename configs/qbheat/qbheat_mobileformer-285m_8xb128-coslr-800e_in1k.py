# QB-Heat with Mobile-Former-285M on ImageNet-1K (Tab. 9): AdamW,
# lr = 1.5e-4 x 1024 / 256, wd 0.1, batch 1024 (8 GPUs x 128), cosine
# decay after 10 warm-up epochs, 256^2 RandomResizedCrop (+ flip, MAE's
# pipeline). Tab. 9 gives no epoch count; 800 is the middle of Fig. 6/
# Tab. 3's 200-2400 range (override `max_epochs` for the others).
_base_ = [
    './_base_/qbheat_mobileformer-285m.py',
    '../_base_/default_runtime_pretrain.py',
]

custom_imports = dict(
    imports=[
        'mmpos', 'mmpos.models.backbones.mobile_former',
        'mmpos.models.necks.qbheat_predictor',
        'mmpos.models.heads.qbheat_head', 'mmpos.models.selfsup.qbheat'
    ],
    allow_failed_imports=False)

img_size = 256
data_root = 'data/imagenet/'
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=img_size,
         crop_ratio_range=(0.2, 1.0), backend='pillow',
         interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=128,
    num_workers=8,
    persistent_workers=True,
    pin_memory=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    dataset=dict(
        type='ImageNet',
        data_root=data_root,
        split='train',
        pipeline=train_pipeline))

max_epochs = 800
warmup_epochs = 10
optim_wrapper = dict(
    type='AmpOptimWrapper',
    loss_scale='dynamic',
    optimizer=dict(
        type='AdamW', lr=1.5e-4 * 1024 / 256, betas=(0.9, 0.95),
        weight_decay=0.1),
    # no decay on norms, biases, global tokens and the A/B models
    paramwise_cfg=dict(
        norm_decay_mult=0.,
        bias_decay_mult=0.,
        custom_keys={
            'backbone.tokens': dict(decay_mult=0.),
            'neck.weight': dict(decay_mult=0.)
        }))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-4, by_epoch=True, begin=0,
         end=warmup_epochs, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', T_max=max_epochs - warmup_epochs,
         by_epoch=True, begin=warmup_epochs, end=max_epochs,
         convert_to_iter_based=True)
]
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=max_epochs)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=100),
    checkpoint=dict(type='CheckpointHook', interval=1, max_keep_ckpts=3))
auto_scale_lr = dict(base_batch_size=1024)
resume = True
