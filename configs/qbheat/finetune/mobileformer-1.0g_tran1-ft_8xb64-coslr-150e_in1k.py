# End-to-end ImageNet-1K fine-tuning (Tab. 12) of a QB-Heat
# Mobile-Former-1.0G with its tran-1 decoder (width 384), from its tran-1
# probe: the MF-285M recipe with 150 epochs, mixup 0.2 and cutmix 0.25.
# Probe checkpoint:  --cfg-options load_from=PATH
_base_ = ['./mobileformer-285m_tran1-ft_8xb64-coslr-200e_in1k.py']

model = dict(
    backbone=dict(arch='1.0g'),
    head=dict(in_channels=1440, embed_dims=384),
    train_cfg=dict(augments=[
        dict(type='Mixup', alpha=0.2),
        dict(type='CutMix', alpha=0.25)
    ]))
load_from = ('work_dirs/mobileformer-1.0g_tran1-probe_8xb512-coslr-200e_'
             'in1k/epoch_200.pth')
train_cfg = dict(max_epochs=150)
