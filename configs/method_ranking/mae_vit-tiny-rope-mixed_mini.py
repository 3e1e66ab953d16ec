# CPU method ranking (tools/paper_tables/method_ranking.py): mmpretrain's MAE
# (its MAE algorithm, MAEPretrainDecoder and MAEPretrainHead, unchanged) on
# the demo detectors' backbone, the 4-block RoPE-Mixed ViT without APE
# (patch 8). MAERoPEViT masks as mmpretrain's MAEViT and rotates every kept
# patch at its own grid coordinates, so `backbone.*` of its checkpoint is the
# transfer backbone as it stands. Mini recipe: 64px random crops of 20-100%
# (the transfer size: 8 x 8 patches, 16 kept at mask ratio 0.75), a 2-block
# 64-wide decoder (2/3 of the encoder width, MAE's ViT-B ratio), norm-pix L2
# loss, 300 iterations of 32 images (DropPos' mini length and batch), MAE's
# AdamW betas; see README.md "Method ranking".
_base_ = [
    'mmpretrain::_base_/models/mae_vit-base-p16.py',
    '../_base_/default_runtime_pretrain.py',
    '../_base_/schedules/pretrain_mini.py',
    '../_base_/datasets/mini_unlabeled.py',
    '../_base_/models/rope-vit_mini-arch.py',
]
custom_imports = dict(imports=['mmpos'], allow_failed_imports=False)

img_size, patch_size = 64, 8
model = dict(
    backbone=dict(
        _delete_=True,
        type='MAERoPEViT',
        arch=_base_.mini_vit_arch,
        img_size=img_size,
        patch_size=patch_size,
        rope=dict(type='mixed'),
        use_ape=False,
        drop_path_rate=0.,
        mask_ratio=0.75,
        init_cfg=_base_.model.init_cfg),  # MAE's, not RoPE-ViT's DeiT init
    neck=dict(
        num_patches=(img_size // patch_size)**2,
        patch_size=patch_size,
        embed_dim=_base_.mini_vit_arch['embed_dims'],
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

# no decay on MAE's tokens nor on the RoPE-Mixed frequencies (as every
# RoPE schedule)
train_cfg = _base_.pretrain_mini_300it.train_cfg
param_scheduler = _base_.pretrain_mini_300it.param_scheduler
default_hooks = _base_.pretrain_mini_300it.default_hooks
optim_wrapper = dict(
    paramwise_cfg=dict(custom_keys={
        name: dict(decay_mult=0.)
        for name in ('mask_token', 'cls_token', '.freqs')}),
    optimizer=_base_.pretrain_mini_300it.optimizer)
