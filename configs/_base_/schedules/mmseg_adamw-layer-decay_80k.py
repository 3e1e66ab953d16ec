# The 160k recipe shortened to 80k iterations (DropPos A.3: UperNet 80k,
# ViT-B lr 1e-4 for MAE-like encoders, searched up to 7e-4).
_base_ = ['./mmseg_adamw-layer-decay_160k.py']

train_cfg = dict(max_iters=80000, val_interval=8000)
default_hooks = dict(checkpoint=dict(interval=8000))
param_scheduler = [
    _base_.seg_warmup,
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=1500,
         end=80000)
]
