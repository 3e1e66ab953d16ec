# The frozen QB-Heat Mobile-Former-285M classifier shared by the ImageNet
# linear and tran-1 probes (QB-Heat Sec. 5, App. B.1): all stages, the
# global tokens and the BN statistics are frozen and the head (set by each
# probe) reads the stride-16 final 720-d map; only the checkpoint's
# `backbone.` weights load (by default the MF-285M pretraining's).
# Validation every 10 epochs; batch 4096 for the lr scaling. No base: the
# probes list mmpretrain's default_runtime.py beside it and set the
# checkpoint hook.

custom_imports = dict(imports=['mmpos'], allow_failed_imports=False)

model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='MobileFormer',
        arch='285m',
        frozen_stages=4,
        norm_eval=True,
        init_cfg=dict(
            type='Pretrained',
            checkpoint=(
                'work_dirs/qbheat_mobileformer-285m_8xb128-coslr-800e_in1k/'
                'epoch_800.pth'),
            prefix='backbone.')))

train_cfg = dict(by_epoch=True, val_interval=10)
val_cfg = dict()
test_cfg = dict()
auto_scale_lr = dict(base_batch_size=4096)
