# Mask R-CNN with a plain ViT-B/16 (CR2PQ Table 1 protocol): blocks 4/6/8/12
# -> MultiLevelNeck (deconv/identity/maxpool) -> FPN -> mmdet's RPN/RoI heads.
# Leaf configs pick the backbone variant (arch, rope_type, use_ape) and the
# pretrained checkpoint.
_base_ = ['mmdet::_base_/models/mask-rcnn_r50_fpn.py', './rope-vit-b16_dense.py']

model = dict(
    backbone=dict(
        _delete_=True,
        **_base_.vit_backbone,
        out_indices=(3, 5, 7, 11),
        final_norm=False),
    neck=[
        dict(type='mmpretrain.MultiLevelNeck', in_channels=768),
        dict(type='FPN', in_channels=[768] * 4, out_channels=256, num_outs=5)
    ])
