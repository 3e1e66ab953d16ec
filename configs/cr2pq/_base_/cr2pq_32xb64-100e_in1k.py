# The CR2PQ ImageNet recipe shortened to 100 epochs (40 warm-up epochs as
# at 300).
_base_ = ['./cr2pq_32xb64-300e_in1k.py']

max_epochs = 100
param_scheduler = [
    _base_.param_scheduler[0],
    dict(_base_.param_scheduler[1], T_max=max_epochs - _base_.warmup_epochs,
         end=max_epochs),
]
train_cfg = dict(max_epochs=max_epochs)
