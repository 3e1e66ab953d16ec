# Linear probing (Tab. 10) of a QB-Heat Mobile-Former-1.0G.
_base_ = ['./mobileformer-285m_linear-probe_8xb512-coslr-90e_in1k.py']

model = dict(
    backbone=dict(
        arch='1.0g',
        init_cfg=dict(checkpoint=(
            'work_dirs/qbheat_mobileformer-1.0g_8xb128-coslr-800e_in1k/'
            'epoch_800.pth'))),
    head=dict(in_channels=1440))
