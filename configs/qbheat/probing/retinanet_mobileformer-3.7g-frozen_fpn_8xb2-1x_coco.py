# Frozen-backbone RetinaNet probing (Tab. 14) of a QB-Heat
# Mobile-Former-3.7G: the MF-285M config with the 3.7g backbone and its
# stride-8 / stride-16 widths.
_base_ = ['./retinanet_mobileformer-285m-frozen_fpn_8xb2-1x_coco.py']

model = dict(
    backbone=dict(arch='3.7g', init_cfg=_base_.mf_pretrained['3.7g']),
    neck=dict(in_channels=_base_.mf_channels['3.7g']))
