# CPU method ranking (tools/paper_tables/method_ranking.py): mmpretrain's MAE
# (its MAE algorithm, MAEPretrainDecoder and MAEPretrainHead, unchanged) on
# the demo detectors' backbone, the 4-block RoPE-Mixed ViT without APE
# (patch 8). MAERoPEViT masks as mmpretrain's MAEViT and rotates every kept
# patch at its own grid coordinates, so `backbone.*` of its checkpoint is the
# transfer backbone as it stands. Mini recipe: 64px random crops of 20-100%
# (8 x 8 patches, 16 kept at mask ratio 0.75), a 2-block 64-wide decoder
# (2/3 of the encoder width, MAE's ViT-B ratio), norm-pix L2 loss, 300
# iterations of 32 images (DropPos' mini length and batch).
_base_ = [
    'mmpretrain::_base_/models/mae_vit-base-p16.py',
    '../_base_/default_runtime_pretrain.py',
    '../_base_/schedules/pretrain_mini.py',
    '../_base_/datasets/mini_unlabeled.py',
]
custom_imports = dict(imports=['mmpos'], allow_failed_imports=False)

img_size, patch_size = 64, 8
model = dict(
    backbone=dict(
        _delete_=True,
        type='MAERoPEViT',
        arch=dict(
            embed_dims=96, num_layers=4, num_heads=3,
            feedforward_channels=384),
        img_size=img_size,
        patch_size=patch_size,
        rope=dict(type='mixed'),
        use_ape=False,
        drop_path_rate=0.,
        mask_ratio=0.75,
        init_cfg=[  # MAE's, not RoPE-ViT's DeiT init
            dict(type='Xavier', layer='Linear', distribution='uniform'),
            dict(type='Constant', layer='LayerNorm', val=1.0, bias=0.0)
        ]),
    neck=dict(
        num_patches=(img_size // patch_size)**2,
        patch_size=patch_size,
        embed_dim=96,
        decoder_embed_dim=64,
        decoder_depth=2,
        decoder_num_heads=2),
    head=dict(patch_size=patch_size),
    data_preprocessor=dict(
        type='SelfSupDataPreprocessor',
        mean=[123.675, 116.28, 103.53],
        std=[58.395, 57.12, 57.375],
        to_rgb=True))

# MAE's augmentation (mmpretrain's imagenet_bs512_mae.py) at 64px.
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=img_size, crop_ratio_range=(0.2, 1.),
         backend='pillow', interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackInputs'),
]
# InfiniteSampler: no 2 s dataloader restart every few iterations (see
# ../droppos/droppos_vit-tiny_mini.py).
train_dataloader = dict(
    batch_size=32,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(pipeline=train_pipeline))

# DropPos' mini schedule: 300 iterations, AdamW lr 1e-3 with MAE's betas
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
# no decay on MAE's tokens nor on the RoPE-Mixed frequencies (as every
# RoPE schedule)
optim_wrapper = dict(
    paramwise_cfg=dict(custom_keys={
        name: dict(decay_mult=0.)
        for name in ('mask_token', 'cls_token', '.freqs')}),
    optimizer=dict(lr=1e-3, betas=(0.9, 0.95)))
