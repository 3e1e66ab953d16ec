# ViTDet's Mask R-CNN (Li et al. 2022; ICPF B.2): the last block of a plain
# ViT-B/16 -> SimpleFeaturePyramid (strides 4..64, LayerNorm) -> RPN with 2
# convs, RoI heads with channel LayerNorm: 4 convs + 1 fc box head, 4-conv mask
# head. Global attention in every block (ICPF B.2); the windowed ViTDet configs
# merge `vitdet_window` (./rope-vit-base-p16_dense.py) into the backbone.
_base_ = ['mmdet::_base_/models/mask-rcnn_r50_fpn.py', './rope-vit-base-p16_dense.py']

head_norm_cfg = dict(type='mmpretrain.LN2d', eps=1e-6, requires_grad=True)
model = dict(
    backbone=dict(
        _delete_=True, **_base_.vit_backbone, out_indices=(-1, ),
        final_norm=True),
    neck=dict(
        _delete_=True,
        type='mmpretrain.SimpleFeaturePyramid',
        in_channels=768,
        out_channels=256,
        num_outs=5),
    rpn_head=dict(num_convs=2),
    roi_head=dict(
        bbox_head=dict(
            type='Shared4Conv1FCBBoxHead',
            conv_out_channels=256,
            norm_cfg=head_norm_cfg),
        mask_head=dict(norm_cfg=head_norm_cfg)))
