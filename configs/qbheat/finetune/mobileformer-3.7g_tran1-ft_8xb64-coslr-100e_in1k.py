# End-to-end ImageNet-1K fine-tuning (Tab. 12) of a QB-Heat
# Mobile-Former-3.7G with its tran-1 decoder (width 768), from its tran-1
# probe: the MF-1.0G recipe with 100 epochs, layer-wise lr decay 0.85,
# mixup 0.8 and cutmix 1.0.
# Probe checkpoint:  --cfg-options load_from=PATH
_base_ = ['./mobileformer-285m_tran1-ft_8xb64-coslr-200e_in1k.py']

model = dict(
    backbone=dict(arch='3.7g'),
    head=dict(in_channels=2880, embed_dims=768),
    train_cfg=dict(augments=[
        dict(type='Mixup', alpha=0.8),
        dict(type='CutMix', alpha=1.0)
    ]))
load_from = ('work_dirs/mobileformer-3.7g_tran1-probe_8xb512-coslr-200e_'
             'in1k/epoch_200.pth')
layer_decay_rate = 0.85
layer_depths = {  # as the MF-285M config
    'backbone.tokens': 0,
    'backbone.stem.': 0,
    'backbone.lite.': 1,
    **{f'backbone.blocks.{i}.': i + 2 for i in range(11)},
}
optim_wrapper = dict(
    paramwise_cfg=dict(custom_keys={
        key: dict(lr_mult=layer_decay_rate**(13 - depth))
        for key, depth in layer_depths.items()
    }))
train_cfg = dict(max_epochs=100)
