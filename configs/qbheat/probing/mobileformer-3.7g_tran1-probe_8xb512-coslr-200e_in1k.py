# tran-1 probing (Tab. 11) of a QB-Heat Mobile-Former-3.7G: width 768,
# dropout 0.2, random erasing 0.25.
_base_ = ['./mobileformer-285m_tran1-probe_8xb512-coslr-200e_in1k.py']

model = dict(
    backbone=dict(
        arch='3.7g',
        init_cfg=dict(checkpoint=(
            'work_dirs/qbheat_mobileformer-3.7g_8xb128-coslr-800e_in1k/'
            'epoch_800.pth'))),
    head=dict(in_channels=2880, embed_dims=768,
              dropout=0.2))
train_pipeline = _base_.train_pipeline
train_pipeline[4].erase_prob = 0.25
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
