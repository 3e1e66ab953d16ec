# Cascade Mask R-CNN with a plain ViT-B/16 (CR2PQ Table 1 protocol): the
# backbone and DeconvMultiLevelNeck + FPN of mask-rcnn_vit-base-p16_mln-fpn.py
# with mmdet's three-stage cascade RoI head.
_base_ = [
    'mmdet::_base_/models/cascade-mask-rcnn_r50_fpn.py',
    './rope-vit-base-p16_dense.py'
]

model = dict(
    backbone=dict(_delete_=True, **_base_.mln_backbone),
    neck=_base_.mln_fpn_neck)
