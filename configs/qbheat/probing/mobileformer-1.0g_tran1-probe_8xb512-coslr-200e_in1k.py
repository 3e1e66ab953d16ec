# tran-1 probing (Tab. 11) of a QB-Heat Mobile-Former-1.0G: width 384,
# dropout 0.2.
_base_ = ['./mobileformer-285m_tran1-probe_8xb512-coslr-200e_in1k.py']

model = dict(
    backbone=dict(arch='1.0g', init_cfg=_base_.mf_pretrained['1.0g']),
    head=dict(in_channels=_base_.mf_channels['1.0g'][-1], embed_dims=384,
              dropout=0.2))
