# The frozen QB-Heat Mobile-Former-285M shared by the COCO probing models
# (QB-Heat Sec. 5, App. C): all stages, the global tokens and the BN
# statistics are frozen. Levels: the stride-8 stage-3 output (48-d) and the
# stride-16 final 1x1-conv map (720-d); the necks add the coarser levels.
# Only the checkpoint's `backbone.` weights load. Detection configs use it as
# `model = dict(backbone=_base_.frozen_mobileformer)`.
_base_ = ['./mobileformer-archs.py']

custom_imports = dict(
    imports=['mmpos', 'mmpos.models.backbones.mobile_former'],
    allow_failed_imports=False)

frozen_mobileformer = dict(
    type='mmpretrain.MobileFormer',
    arch='285m',
    out_indices=(2, 4),
    frozen_stages=4,
    norm_eval=True,
    init_cfg=_base_.mf_pretrained['285m'])
frozen_mobileformer_channels = _base_.mf_channels['285m']
