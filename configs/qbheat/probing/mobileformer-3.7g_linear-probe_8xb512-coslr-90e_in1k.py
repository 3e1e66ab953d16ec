# Linear probing (Tab. 10) of a QB-Heat Mobile-Former-3.7G.
_base_ = ['./mobileformer-285m_linear-probe_8xb512-coslr-90e_in1k.py']

model = dict(
    backbone=dict(
        arch='3.7g',
        init_cfg=dict(checkpoint=(
            'work_dirs/qbheat_mobileformer-3.7g_8xb128-coslr-800e_in1k/'
            'epoch_800.pth'))),
    head=dict(in_channels=2880))
