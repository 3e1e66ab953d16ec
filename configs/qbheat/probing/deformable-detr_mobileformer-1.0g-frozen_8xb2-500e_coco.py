# Frozen-backbone Deformable DETR probing (the MF-Dec stand-in, Tab. 5) of a
# QB-Heat Mobile-Former-1.0G: the MF-285M config with the 1.0g backbone and
# its stride-8 / stride-16 widths.
_base_ = ['./deformable-detr_mobileformer-285m-frozen_8xb2-500e_coco.py']

model = dict(
    backbone=dict(arch='1.0g', init_cfg=_base_.mf_pretrained['1.0g']),
    neck=dict(in_channels=_base_.mf_channels['1.0g']))
