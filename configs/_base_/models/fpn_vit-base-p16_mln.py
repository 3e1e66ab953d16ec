# Semantic FPN with a plain ViT-B/16 (CR2PQ Table 2 protocol): blocks
# 4/6/8/12 -> DeconvMultiLevelNeck (strides 4..32) -> FPN -> mmseg's FPNHead.
_base_ = ['mmseg::_base_/models/fpn_r50.py', './rope-vit-base-p16_dense.py']

model = dict(
    pretrained=None,  # the backbone loads through its init_cfg
    backbone=dict(_delete_=True, **_base_.mln_backbone),
    neck=[
        dict(type='mmpretrain.DeconvMultiLevelNeck', in_channels=768),
        dict(type='FPN', in_channels=[768] * 4, out_channels=256, num_outs=4)
    ],
    decode_head=dict(num_classes=150),
    # ADE20K 512x512: padded to 512, evaluated with 512 sliding windows
    data_preprocessor=dict(size=(512, 512)),
    test_cfg=dict(mode='slide', crop_size=(512, 512), stride=(341, 341)))
