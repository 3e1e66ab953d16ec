# The demo segmentor: the tiny RoPE-Mixed ViT (stride-8 patches, blocks
# 1-4) -> DeconvMultiLevelNeck -> FPN -> Semantic FPN head, 64 wide (the CR2PQ
# layout). Leaves add a mini dataset (its `crop_size`; its classes are
# imported here), a schedule and the number of classes.
_base_ = [
    'mmseg::_base_/models/fpn_r50.py',
    '../../_base_/models/rope-vit-base-p16_dense.py',
]
custom_imports = dict(
    imports=['mmpos', 'mmpos_harness.mini_data.datasets'],
    allow_failed_imports=False)
embed_dims = 96
width = 64
norm_cfg = dict(type='BN', requires_grad=True)
model = dict(
    pretrained=None,  # the backbone loads through its init_cfg
    backbone=dict(
        _base_.mln_backbone,
        _delete_=True,
        arch=dict(
            embed_dims=96, num_layers=4, num_heads=3,
            feedforward_channels=384),
        patch_size=8,
        drop_path_rate=0.,
        out_indices=(0, 1, 2, 3)),
    neck=[
        dict(type='mmpretrain.DeconvMultiLevelNeck', in_channels=embed_dims,
             scale_factors=(2.0, 1.0, 0.5, 0.25), norm_cfg=norm_cfg),
        dict(type='FPN', in_channels=[embed_dims] * 4, out_channels=width,
             num_outs=4)
    ],
    decode_head=dict(
        in_channels=[width] * 4, channels=width, norm_cfg=norm_cfg),
    test_cfg=dict(mode='whole'))
