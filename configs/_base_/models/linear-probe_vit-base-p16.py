# Linear segmentation probe (DINOv2 §7.3 "linear"): the frozen ViT-B/16
# (every block, the patch embedding and the final norm frozen, eval mode) ->
# normalised last-block patch tokens -> BatchNorm + 1x1 conv to the classes
# (BNLinearHead) -> bilinear upsampling to the labels. Only the head trains.
_base_ = ['mmseg::_base_/models/fpn_r50.py', './rope-vit-base-p16_dense.py']

model = dict(
    pretrained=None,  # the backbone loads through its init_cfg
    backbone=dict(
        _base_.vit_backbone, _delete_=True, out_indices=(-1, ),
        final_norm=True, frozen_stages=12, drop_path_rate=0.),
    neck=None,
    decode_head=dict(
        _delete_=True,
        type='mmpretrain.BNLinearHead',
        in_channels=768,
        channels=768,
        dropout_ratio=0.,
        num_classes=150,
        norm_cfg=dict(type='SyncBN', requires_grad=True),
        align_corners=False,
        loss_decode=dict(
            type='mmseg.CrossEntropyLoss', use_sigmoid=False,
            loss_weight=1.0)),
    # ADE20K 512x512: padded to 512, evaluated with 512 sliding windows
    data_preprocessor=dict(size=(512, 512)),
    test_cfg=dict(mode='slide', crop_size=(512, 512), stride=(341, 341)))
