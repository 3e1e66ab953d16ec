# UperNet with a plain ViT-B/16 (CR2PQ Table 2, RoPE-ViT Table 3, DropPos
# A.3 protocol): blocks 4/6/8/12 -> DeconvMultiLevelNeck -> UPerHead + FCN
# auxiliary head.
_base_ = ['mmseg::_base_/models/upernet_mae.py', './rope-vit-base-p16_dense.py']

model = dict(
    backbone=dict(_delete_=True, **_base_.mln_backbone),
    neck=dict(
        _delete_=True,
        type='mmpretrain.DeconvMultiLevelNeck',
        in_channels=768,
        norm_cfg=dict(type='SyncBN', requires_grad=True)),
    decode_head=dict(in_channels=[768] * 4, channels=512, num_classes=150),
    auxiliary_head=dict(in_channels=768, num_classes=150),
    # ADE20K 512x512: padded to 512, evaluated with 512 sliding windows
    data_preprocessor=dict(size=(512, 512)),
    test_cfg=dict(mode='slide', crop_size=(512, 512), stride=(341, 341)))
