# RetinaNet with a frozen Mobile-Former-285M (QB-Heat Sec. 5, App. C,
# Tab. 14): all stages, tokens and BN statistics frozen; only FPN + head
# learn. Levels: the stride-8 stage output (48-d) and the stride-16 final
# 1x1-conv map (720-d); FPN adds strides 32-128 by stride-2 convs, matching
# RetinaNet's anchors. Only the checkpoint's `backbone.` weights load.
_base_ = ['mmdet::_base_/models/retinanet_r50_fpn.py']

custom_imports = dict(
    imports=['mmpos', 'mmpos.models.backbones.mobile_former'],
    allow_failed_imports=False)

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmpretrain.MobileFormer',
        arch='285m',
        out_indices=(2, 4),
        frozen_stages=4,
        norm_eval=True,
        init_cfg=dict(
            type='Pretrained',
            checkpoint='work_dirs/qbheat_mobileformer-285m/epoch_800.pth',
            prefix='backbone.')),
    neck=dict(in_channels=[48, 720], start_level=0, num_outs=5))
