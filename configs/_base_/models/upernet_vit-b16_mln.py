# UperNet with a plain ViT-B/16 (CR2PQ Table 2, RoPE-ViT Table 6 protocol):
# blocks 4/6/8/12 -> MultiLevelNeck -> UPerHead + FCN auxiliary head.
_base_ = ['mmseg::_base_/models/upernet_mae.py', './rope-vit-b16_dense.py']

model = dict(
    backbone=dict(
        _delete_=True,
        **_base_.vit_backbone,
        out_indices=(3, 5, 7, 11),
        final_norm=False),
    neck=dict(
        _delete_=True,
        type='mmpretrain.MultiLevelNeck',
        in_channels=768,
        norm_cfg=dict(type='SyncBN', requires_grad=True)),
    decode_head=dict(in_channels=[768] * 4, channels=512, num_classes=150),
    auxiliary_head=dict(in_channels=768, num_classes=150))
