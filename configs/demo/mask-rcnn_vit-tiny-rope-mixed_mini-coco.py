# Demo / test config: a tiny RoPE-Mixed ViT + ViTDet-style Mask R-CNN (global
# attention, simple feature pyramid) trained from scratch on mini-COCO for a
# few hundred iterations on CPU, scored by CocoMetric; 64-wide heads, the
# stride-8 tiny ViT. Other demo detectors (mini-objects, windowed) are
# deltas on this config.
_base_ = [
    '../_base_/models/mask-rcnn_vit-base-p16_simple-fpn.py',
    '../_base_/datasets/mini_coco_instance.py',
    '../_base_/schedules/mmdet_mini_300it.py',
]
embed_dims = 96
model = dict(
    backbone=dict(
        arch=dict(
            _delete_=True, embed_dims=96, num_layers=4, num_heads=3,
            feedforward_channels=384),
        patch_size=8,
        drop_path_rate=0.),
    # Stride-8 patches: scales (2, 1, 1/2, 1/4) give strides 4..32.
    neck=dict(
        in_channels=embed_dims,
        out_channels=64,
        scale_factors=(2.0, 1.0, 0.5, 0.25)),
    rpn_head=dict(in_channels=64, feat_channels=64),
    roi_head=dict(
        bbox_roi_extractor=dict(out_channels=64),
        # mmdet's 2-fc box head and norm-free mask head (the base has
        # ViTDet's LN heads, as the windowed demo)
        bbox_head=dict(
            type='Shared2FCBBoxHead', in_channels=64, fc_out_channels=256,
            num_classes=3),
        mask_roi_extractor=dict(out_channels=64),
        mask_head=dict(in_channels=64, conv_out_channels=64, norm_cfg=None,
                       num_classes=3)),
    train_cfg=dict(rcnn=dict(sampler=dict(num=128))))
