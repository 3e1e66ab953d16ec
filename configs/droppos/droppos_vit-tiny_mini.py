# DropPos on the mini unlabeled images (CPU): the 4-block mini ViT (width
# 96) with the paper's fixed sin-cos APE, whole images resized to 32px with
# 8px patches (N = 16 positions, the demo's patch size, so the backbone
# converts to the demo detectors), a 2-block 128-wide decoder, gamma_pos =
# 0.75 and sigma 1 -> 0, batch 32 x 300 iterations. Mini-only departures
# (docs/methods/droppos.md): patch mask ratio gamma = 0.25 (a Table 1 row;
# 0.75 leaves 4 of 16 patches, a single anchor), attentive reconstruction
# off (tau = inf) and whole-image views (0.2-1 crops of textures carry
# almost no position cue at this scale). `acc_pos` (top-1 on the dropped
# positions) is logged with the loss; chance is 1/16.
_base_ = [
    './_base_/droppos_vit-base-p16.py',
    '../_base_/default_runtime_pretrain.py',
    '../_base_/schedules/pretrain_mini.py',
    '../_base_/datasets/mini_unlabeled.py',
]

img_size, patch_size = 32, 8
model = dict(
    backbone=dict(
        arch=dict(
            _delete_=True, embed_dims=96, num_layers=4, num_heads=3,
            feedforward_channels=384),
                  img_size=img_size,
                  patch_size=patch_size),
    head=dict(num_patches=(img_size // patch_size)**2, in_channels=96,
              embed_dims=128, num_heads=4, tau=None),
    mask_ratio=0.25,
    data_preprocessor=dict(
        type='SelfSupDataPreprocessor',
        mean=[123.675, 116.28, 103.53],
        std=[58.395, 57.12, 57.375],
        to_rgb=True))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(img_size, img_size), backend='pillow',
         interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackInputs'),
]
# InfiniteSampler: a batch of 32 ends an epoch of 64-256 images every 2-8
# iterations, and mmengine's loop sleeps 2 s at every dataloader restart.
train_dataloader = dict(
    batch_size=32,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(pipeline=train_pipeline))

# 300 iterations, AdamW lr 1e-3 with MAE's betas, 20 warm-up iterations
train_cfg = dict(max_iters=300)
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0,
         end=20),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=False, begin=20,
         end=300),
]
default_hooks = dict(
    _base_.pretrain_mini_hooks,
    logger=dict(type='LoggerHook', interval=10),
    checkpoint=dict(type='IntactCheckpointHook', by_epoch=False, interval=300,
                    max_keep_ckpts=2))
optim_wrapper = dict(
    clip_grad=dict(max_norm=5.0),
    optimizer=dict(lr=1e-3, betas=(0.9, 0.95)),
    paramwise_cfg=dict(custom_keys={'mask_token': dict(decay_mult=0.),
                                    'cls_token': dict(decay_mult=0.)}))
