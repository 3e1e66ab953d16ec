# ViTDet-style Mask R-CNN (DropPos A.2, ICPF B.2 protocol): the last block of
# a plain ViT-B/16 -> SimpleFeaturePyramid (strides 4..64, LayerNorm) -> RPN
# and RoI heads. Global attention in every block (no window attention, no
# relative position bias), as in ICPF B.2. ViT-S/16 leaves merge `vit_s16`.
_base_ = ['mmdet::_base_/models/mask-rcnn_r50_fpn.py', './rope-vit-b16_dense.py']

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
    rpn_head=dict(num_convs=2))
vit_s16 = dict(backbone=dict(arch='small'), neck=dict(in_channels=384))
