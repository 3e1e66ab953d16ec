# Linear probing (Tab. 10) of a QB-Heat Mobile-Former-3.7G.
_base_ = ['./mobileformer-285m_linear-probe_8xb512-coslr-90e_in1k.py']

model = dict(
    backbone=dict(arch='3.7g', init_cfg=_base_.mf_pretrained['3.7g']),
    head=dict(in_channels=_base_.mf_channels['3.7g'][-1]))
