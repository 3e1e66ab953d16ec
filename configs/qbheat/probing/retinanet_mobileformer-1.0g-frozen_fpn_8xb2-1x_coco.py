# Frozen-backbone RetinaNet probing (Tab. 14) of a QB-Heat
# Mobile-Former-1.0G: the MF-285M config with the 1.0g backbone and its
# stride-8 / stride-16 widths.
_base_ = ['./retinanet_mobileformer-285m-frozen_fpn_8xb2-1x_coco.py']

model = dict(
    backbone=dict(arch='1.0g', init_cfg=_base_.mf_pretrained['1.0g']),
    neck=dict(in_channels=_base_.mf_channels['1.0g']))
