# The demo detector: the tiny RoPE-Mixed ViT (stride-8 patches) + ViTDet-
# style Mask R-CNN with 64-wide heads. Leaves add a dataset, a schedule and
# the number of classes.
_base_ = [
    '../../_base_/models/mask-rcnn_vit-base-p16_simple-fpn.py',
    '../../_base_/models/rope-vit_mini-arch.py',
]
embed_dims = _base_.mini_vit_arch['embed_dims']
model = dict(
    backbone=dict(
        arch=dict(_delete_=True, **_base_.mini_vit_arch),
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
        # mmdet's 2-fc box head and norm-free mask head (the demo numbers
        # were measured with them; the shared base has ViTDet's LN heads)
        bbox_head=dict(
            type='Shared2FCBBoxHead', in_channels=64, fc_out_channels=256),
        mask_roi_extractor=dict(out_channels=64),
        mask_head=dict(in_channels=64, conv_out_channels=64, norm_cfg=None)),
    train_cfg=dict(rcnn=dict(sampler=dict(num=128))))
