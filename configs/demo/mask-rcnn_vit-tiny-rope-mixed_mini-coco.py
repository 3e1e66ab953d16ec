# Demo / test config: a tiny RoPE-Mixed ViT + ViTDet-style Mask R-CNN (global
# attention, simple feature pyramid) trained from scratch on mini-COCO for a
# few hundred iterations on CPU, scored by CocoMetric. It keeps mmdet's 2-fc
# box head and norm-free mask head (the README's demo numbers were measured
# with them); the windowed demo uses ViTDet's LayerNorm heads.
_base_ = [
    '../_base_/models/mask-rcnn_vit-b16_simple-fpn.py',
    '../_base_/datasets/mini_coco_instance.py',
    '../_base_/schedules/mmdet_mini_300it.py',
    '../_base_/models/rope-vit_mini-arch.py',
]
embed_dims = _base_.mini_vit_arch['embed_dims']
model = dict(
    backbone=dict(
        arch=dict(_delete_=True, **_base_.mini_vit_arch),
        patch_size=8,
        drop_path_rate=0.),
    # Stride-8 patches on 128px images: scales (2, 1, 1/2, 1/4) give 4..32.
    neck=dict(
        in_channels=embed_dims,
        out_channels=64,
        scale_factors=(2.0, 1.0, 0.5, 0.25)),
    rpn_head=dict(in_channels=64, feat_channels=64),
    roi_head=dict(
        bbox_roi_extractor=dict(out_channels=64),
        bbox_head=dict(
            type='Shared2FCBBoxHead', in_channels=64, fc_out_channels=256,
            num_classes=3),
        mask_roi_extractor=dict(out_channels=64),
        mask_head=dict(
            in_channels=64, conv_out_channels=64, num_classes=3,
            norm_cfg=None)),
    train_cfg=dict(rcnn=dict(sampler=dict(num=128))))
