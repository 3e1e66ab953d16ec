# DropPos on NaFlex batches (CPU mini run, #57): the 4-block mini RoPE-Mixed
# ViT (width 96, 8 px patches) pretrained as DropPos on views of the mini
# unlabeled images at their own aspect ratios: a random crop of 50-100 % of
# the area at width / height 1:3 to 3:1, resized at that ratio to at most
# 32 patches (timm's token-budget rule), patchified and padded to the
# batch's longest sequence with a key mask (docs/user_guides/naflex.md).
# Per image: 25 % of its patches removed (the DropPos mini's gamma), 75 % of
# the kept ones lose their position (gamma_pos), and each is classified
# among the positions of its own grid (NaFlexDropPosHead: a 2-block
# 128-wide decoder, outputs for a 12 x 12 canvas, more than the 10 patches
# a side that 32 tokens at 1:3 give). sigma 1 -> 0, no attentive weights
# (tau = inf), as the DropPos mini. No online probe or health hooks (they
# feed square images).
_base_ = [
    './_base_/naflex_mini.py',
    '../_base_/default_runtime_pretrain.py',
    '../_base_/schedules/pretrain_mini.py',
    '../_base_/datasets/mini_unlabeled.py',
]

max_tokens = 32
model = dict(
    type='NaFlexDropPos',
    backbone=dict(_base_.mini_vit, img_size=48, out_type='raw'),
    head=dict(type='NaFlexDropPosHead', max_grid=(12, 12), in_channels=96,
              embed_dims=128, num_layers=2, num_heads=4, sigma=1.,
              tau=None),
    mask_ratio=0.25,
    pos_mask_ratio=0.75,
    data_preprocessor=_base_.naflex_preprocessor)
custom_hooks = [dict(type='DropPosSigmaHook', start=1.0, end=0.0)]

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='NaFlexRandomResizedCrop', patch_size=_base_.patch_size,
         max_tokens=max_tokens, scale=(0.5, 1.), ratio=(1 / 3, 3.)),
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
    paramwise_cfg=dict(custom_keys={'pos_mask_token': dict(decay_mult=0.),
                                    'cls_token': dict(decay_mult=0.)}))
