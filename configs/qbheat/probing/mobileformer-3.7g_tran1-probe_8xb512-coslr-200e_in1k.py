# tran-1 probing (Tab. 11) of a QB-Heat Mobile-Former-3.7G: width 768,
# dropout 0.2, random erasing 0.25.
_base_ = ['./mobileformer-285m_tran1-probe_8xb512-coslr-200e_in1k.py']

model = dict(
    backbone=dict(arch='3.7g', init_cfg=_base_.mf_pretrained['3.7g']),
    head=dict(in_channels=_base_.mf_channels['3.7g'][-1], embed_dims=768,
              dropout=0.2))
train_pipeline = _base_.train_pipeline
train_pipeline[4].erase_prob = 0.25
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
