# The COCO probing models (QB-Heat Sec. 5, App. C) on the frozen QB-Heat
# Mobile-Former-285M: `frozen_mobileformer` of ./mobileformer-archs.py (all
# stages, the global tokens and the BN statistics frozen; levels: the
# stride-8 stage-3 output (48-d) and the stride-16 final 1x1-conv map
# (720-d), the necks add the coarser levels; only the checkpoint's
# `backbone.` weights load) and the mmpos modules it needs. Detection
# configs use it as `model = dict(backbone=_base_.frozen_mobileformer)`.
_base_ = ['./mobileformer-archs.py']

custom_imports = dict(
    imports=['mmpos', 'mmpos.models.backbones.mobile_former'],
    allow_failed_imports=False)
