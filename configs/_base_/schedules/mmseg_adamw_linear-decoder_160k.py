# Segmenter linear decoder on ADE20K (ICPF B.3, after LOCA): 160k iterations
# at batch 16, AdamW, poly decay to min_lr = 0.1 x lr. ICPF sweeps lr in
# {8e-5, 3e-5, 1e-5, 8e-6} and weight decay in {1e-2, 1e-4}; the default is
# the first of each (`--cfg-options optim_wrapper.optimizer.lr=...`). No
# layer-wise decay (none is mentioned).
_base_ = ['./mmseg_adamw-layer-decay_160k.py']

lr = 8e-5
optim_wrapper = dict(
    optimizer=dict(lr=lr, weight_decay=1e-2),
    paramwise_cfg=dict(layer_decay_rate=1.0))
param_scheduler = [
    dict(type='PolyLR', power=0.9, eta_min=0.1 * lr, by_epoch=False,
         begin=0, end=160000)
]
