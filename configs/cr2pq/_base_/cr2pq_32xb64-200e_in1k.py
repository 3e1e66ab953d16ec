# The CR2PQ ImageNet recipe shortened to 200 epochs (40 warm-up epochs as
# at 300): the cosine phase of its schedule ends at epoch 200.
_base_ = ['./cr2pq_32xb64-300e_in1k.py']

max_epochs, warmup_epochs = 200, 40
param_scheduler = _base_.param_scheduler
param_scheduler[1].update(T_max=max_epochs - warmup_epochs, end=max_epochs)
train_cfg = dict(max_epochs=max_epochs)
