# RetinaNet with a frozen Mobile-Former-285M (QB-Heat Sec. 5, App. C,
# Tab. 14): only FPN + head learn. FPN takes the stride-8 and stride-16
# levels of the shared frozen backbone and adds strides 32-128 by stride-2
# convs, matching RetinaNet's anchors.
_base_ = [
    'mmdet::_base_/models/retinanet_r50_fpn.py',
    './mobileformer-285m-frozen.py',
]

model = dict(
    backbone=dict(_delete_=True, **_base_.frozen_mobileformer),
    neck=dict(in_channels=_base_.frozen_mobileformer_channels, start_level=0,
              num_outs=5))
