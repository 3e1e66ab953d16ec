# The CR2PQ ImageNet recipe shortened to 200 epochs (40 warm-up epochs as
# at 300).
_base_ = ['./cr2pq_32xb64-300e_in1k.py']

max_epochs, warmup_epochs = 200, 40
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-4, by_epoch=True, begin=0,
         end=warmup_epochs, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', T_max=max_epochs - warmup_epochs,
         eta_min=1e-6, by_epoch=True, begin=warmup_epochs, end=max_epochs,
         convert_to_iter_based=True),
]
train_cfg = dict(max_epochs=max_epochs)
