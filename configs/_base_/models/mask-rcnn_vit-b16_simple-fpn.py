# ViTDet-style Mask R-CNN (DropPos A.2, ICPF B.2 protocol): the last block of
# a plain ViT-B/16 -> SimpleFeaturePyramid (strides 4..64, LayerNorm) -> RPN
# and RoI heads. Global attention in every block (no window attention, no
# relative position bias), as in ICPF B.2.
_base_ = ['mmdet::_base_/models/mask-rcnn_r50_fpn.py']
custom_imports = dict(imports=['mmpos'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmpretrain.RoPEVisionTransformer',
        arch='base',
        patch_size=16,
        rope_type='mixed',
        use_ape=False,
        drop_path_rate=0.1,
        out_indices=(-1, ),
        out_type='featmap',
        final_norm=True),
    neck=dict(
        _delete_=True,
        type='mmpretrain.SimpleFeaturePyramid',
        in_channels=768,
        out_channels=256,
        num_outs=5),
    rpn_head=dict(num_convs=2))
