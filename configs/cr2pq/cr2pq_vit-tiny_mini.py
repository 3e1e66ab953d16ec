# CR2PQ on the mini unlabeled images (CPU): the 4-block ViT of the demo with
# RoPE-Axial, two 64px BYOL views (8 x 8 patches of 8 px) with their crop
# boxes, EMA teacher (tau 0.996 -> 1 as on ImageNet).
# vs the ImageNet configs (cr2pq_vit-*-p16_32xb64-*e_in1k.py): a 4-block
# width-96 ViT on 64px views instead of ViT-S/B/16 at 224px; batch 8 and
# the mini schedule instead of 2048 x 100-300 epochs; the EMA teacher with
# its l2 targets (Table 4's weakest row; the ImageNet default, a frozen
# pretrained DINO teacher, has no mini counterpart); BYOL's blur / colour
# jitter kept at their ImageNet sigma and strength.
_base_ = [
    '../_base_/default_runtime_pretrain.py',
    '../_base_/schedules/pretrain_mini.py',
    '../_base_/datasets/mini_unlabeled.py',
    '_base_/cr2pq_vit-base-p16.py',
    '_base_/byol-views_boxes.py',
]

size = 64
model = dict(
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=96, num_layers=4, num_heads=3,
                  feedforward_channels=384),
        img_size=size,
        patch_size=8),
    neck=dict(embed_dims=96, num_heads=3, out_channels=96,
              hidden_channels=256))

# The BYOL views of the ImageNet configs with 64px crops of 20-100% of the
# image (bilinear).
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='MultiViewWithBoxes', num_views=[1, 1],
         transforms=[
             [dict(type='RandomResizedCropWithBox', scale=size,
                   crop_ratio_range=(0.2, 1.), backend='pillow')] + view[1:]
             for view in _base_.train_pipeline[1].transforms]),
    dict(type='PackInputs', algorithm_keys=['crop_boxes']),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
default_hooks = _base_.pretrain_mini_hooks
