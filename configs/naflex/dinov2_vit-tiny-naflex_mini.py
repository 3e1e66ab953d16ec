# DINOv2 on NaFlex views (CPU mini run, #57): the DINOv2 mini (its ViT with
# APE, heads, Sinkhorn-Knopp teacher, masks and schedule) with every crop at
# its own aspect ratio: 2 global crops of 32-100 % of the image and 2 local
# ones of 5-32 %, each at width / height 1:3 to 3:1, resized at that ratio
# to at most 64 (global) or 16 (local) patches of 8 px, the DINOv2 mini's
# 64 / 32 px squares in tokens; each view padded to its longest sequence
# with a key mask (docs/user_guides/naflex.md). iBOT's block masks are drawn
# on each image's own grid. No online probe, health or encoder-token hooks
# (they feed square images).
_base_ = ['../dinov2/dinov2_vit-tiny_mini.py']

global_tokens, local_tokens, num_local_crops = 64, 16, 2
model = dict(type='NaFlexDINOv2',
             data_preprocessor=dict(type='NaFlexDataPreprocessor'))
global_view = [
    dict(type='NaFlexRandomResizedCrop', patch_size=8,
         max_tokens=global_tokens, scale=(0.32, 1.), ratio=(1 / 3, 3.)),
    dict(type='RandomFlip', prob=0.5),
] + _base_.color_aug
local_view = [
    dict(type='NaFlexRandomResizedCrop', patch_size=8,
         max_tokens=local_tokens, scale=(0.05, 0.32), ratio=(1 / 3, 3.)),
    dict(type='RandomFlip', prob=0.5),
] + _base_.color_aug
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='MultiView', num_views=[2, num_local_crops],
         transforms=[global_view, local_view]),
    dict(type='NaFlexPatchify', patch_size=8),
    dict(type='PackNaFlexInputs'),
]
train_dataloader = dict(
    collate_fn=dict(_delete_=True, type='naflex_collate'),
    dataset=dict(pipeline=train_pipeline))
default_hooks = dict(online_probe=None, health_monitor=None,
                     encoder_tokens=None)
