# Segmenter's linear decoder on a plain ViT-B/16 (ICPF B.3, after LOCA): the
# normalised last-block patch tokens -> one 1x1 conv to the classes (mmseg's
# FCNHead with num_convs=0), upsampled to the image.
_base_ = ['mmseg::_base_/models/fpn_r50.py', './rope-vit-base-p16_dense.py']

model = dict(
    pretrained=None,  # the backbone loads through its init_cfg
    backbone=dict(
        _delete_=True, **_base_.vit_backbone, out_indices=(-1, ),
        final_norm=True),
    neck=None,
    decode_head=dict(
        _delete_=True,
        type='FCNHead',
        in_channels=768,
        channels=768,
        num_convs=0,
        concat_input=False,
        dropout_ratio=0.0,
        num_classes=150,
        align_corners=False,
        loss_decode=dict(
            type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),
    # ADE20K 512x512: padded to 512, evaluated with 512 sliding windows
    data_preprocessor=dict(size=(512, 512)),
    test_cfg=dict(mode='slide', crop_size=(512, 512), stride=(341, 341)))
