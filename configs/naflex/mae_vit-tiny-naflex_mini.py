# MAE on NaFlex batches (CPU mini run, #57): the 4-block mini RoPE-Mixed ViT
# (width 96, 8 px patches) pretrained as MAE on views of the mini unlabeled
# images at their own aspect ratios: a random crop of 30-100 % of the area
# at width / height 1:3 to 3:1, resized at that ratio to at most 32 patches
# (timm's token-budget rule), patchified and padded to the batch's longest
# sequence with a key mask (docs/user_guides/naflex.md). 75 % of each
# image's patches removed; a 2-block 128-wide decoder; normalised-pixel
# MSE on the removed patches. No online probe or health hooks (they feed
# square images).
_base_ = [
    './_base_/naflex_mini.py',
    '../_base_/default_runtime_pretrain.py',
    '../_base_/schedules/pretrain_mini.py',
    '../_base_/datasets/mini_unlabeled.py',
]

max_tokens = 32
model = dict(
    type='NaFlexMAE',
    backbone=dict(_base_.mini_vit, img_size=48, out_type='raw'),
    mask_ratio=0.75,
    decoder=dict(embed_dims=128, num_layers=2, num_heads=4),
    data_preprocessor=_base_.naflex_preprocessor)

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='NaFlexRandomResizedCrop', patch_size=_base_.patch_size,
         max_tokens=max_tokens, scale=(0.3, 1.), ratio=(1 / 3, 3.)),
    dict(type='RandomFlip', prob=0.5),
    *_base_.naflex_pack,
]
train_dataloader = dict(
    batch_size=16,
    collate_fn=dict(_delete_=True, type='naflex_collate'),
    dataset=dict(pipeline=train_pipeline))
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=5),
    checkpoint=dict(type='IntactCheckpointHook', by_epoch=False,
                    interval=_base_.max_iters, max_keep_ckpts=1))
optim_wrapper = dict(
    optimizer=dict(lr=1e-3, betas=(0.9, 0.95)),
    paramwise_cfg=dict(custom_keys={'mask_token': dict(decay_mult=0.),
                                    'cls_token': dict(decay_mult=0.)}))
