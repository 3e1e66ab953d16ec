# Semantic FPN on ADE20K with a ViT (the XCiT / SelfPatch protocol CR2PQ
# Table 2 follows): 40k iterations, AdamW lr 1e-4 wd 1e-4, poly (power 0.9),
# no layer-wise decay.
_base_ = ['./mmseg_adamw-layer-decay_160k.py']

optim_wrapper = dict(
    optimizer=dict(weight_decay=1e-4),
    paramwise_cfg=dict(layer_decay_rate=1.0))
train_cfg = dict(max_iters=40000, val_interval=4000)
default_hooks = dict(checkpoint=dict(interval=4000))
param_scheduler = [
    dict(type='PolyLR', power=0.9, eta_min=0.0, by_epoch=False, begin=0,
         end=40000)
]
