# tran-1 probing (Tab. 11) of a QB-Heat Mobile-Former-1.0G: width 384,
# dropout 0.2.
_base_ = ['./mobileformer-285m_tran1-probe_8xb512-coslr-200e_in1k.py']

model = dict(
    backbone=dict(
        arch='1.0g',
        init_cfg=dict(checkpoint=(
            'work_dirs/qbheat_mobileformer-1.0g_8xb128-coslr-800e_in1k/'
            'epoch_800.pth'))),
    head=dict(in_channels=1440, embed_dims=384,
              dropout=0.2))
