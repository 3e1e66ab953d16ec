# Frozen-backbone Deformable DETR probing (the MF-Dec stand-in, Tab. 5) of a
# QB-Heat Mobile-Former-1.0G: the MF-285M config with the 1.0g backbone and
# its stride-8 / stride-16 widths.
_base_ = ['./deformable-detr_mobileformer-285m-frozen_8xb2-500e_coco.py']

model = dict(
    backbone=dict(
        arch='1.0g',
        init_cfg=dict(checkpoint=(
            'work_dirs/qbheat_mobileformer-1.0g_8xb128-coslr-800e_in1k/'
            'epoch_800.pth'))),
    neck=dict(in_channels=[96, 1440]))
