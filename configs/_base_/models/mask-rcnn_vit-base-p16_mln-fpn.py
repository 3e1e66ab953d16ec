# Mask R-CNN with a plain ViT-B/16 (CR2PQ Table 1 protocol): blocks 4/6/8/12 ->
# DeconvMultiLevelNeck (deconv/identity/maxpool) -> FPN -> mmdet's RPN/RoI
# heads. Leaf configs pick the backbone variant (arch, rope, use_ape) and the
# pretrained checkpoint.
_base_ = ['mmdet::_base_/models/mask-rcnn_r50_fpn.py', './rope-vit-base-p16_dense.py']

model = dict(
    backbone=dict(_delete_=True, **_base_.mln_backbone),
    neck=_base_.mln_fpn_neck)
