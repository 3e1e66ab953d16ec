# Linear probing (Tab. 10) of a QB-Heat Mobile-Former-1.0G.
_base_ = ['./mobileformer-285m_linear-probe_8xb512-coslr-90e_in1k.py']

model = dict(
    backbone=dict(arch='1.0g', init_cfg=_base_.mf_pretrained['1.0g']),
    head=dict(in_channels=_base_.mf_channels['1.0g'][-1]))
