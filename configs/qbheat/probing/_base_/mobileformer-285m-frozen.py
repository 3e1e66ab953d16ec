# The frozen QB-Heat Mobile-Former-285M of the COCO probing models (QB-Heat
# Sec. 5, App. C): all stages, the global tokens and the BN statistics
# frozen; levels: the stride-8 stage-3 output (48-d) and the stride-16 final
# 1x1-conv map (720-d), the necks add the coarser levels; only the
# checkpoint's `backbone.` weights load. Detection configs splice it in with
# `backbone=dict(_delete_=True, **_base_.frozen_mobileformer)`.
custom_imports = dict(imports=['mmpos'], allow_failed_imports=False)
frozen_mobileformer = dict(
    type='mmpretrain.MobileFormer',
    arch='285m',
    out_indices=(2, 4),
    frozen_stages=4,
    norm_eval=True,
    init_cfg=dict(
        type='Pretrained',
        checkpoint=('work_dirs/qbheat_mobileformer-285m_8xb128-coslr-800e_'
                    'in1k/epoch_800.pth'),
        prefix='backbone.'))
