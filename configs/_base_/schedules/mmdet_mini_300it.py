# Short CPU schedule for mmdet detectors on mini-COCO (demo and tests): 300
# iterations, AdamW lr 1e-3 without layer decay, 30 warm-up iterations then
# cosine, gradient clipping, one validation at the end.
_base_ = [
    './mmdet_adamw-layer-decay_1x.py', 'mmdet::_base_/default_runtime.py',
    './mini_300it_loop.py'
]

max_iters = _base_.mini_300it.train_cfg.max_iters
train_cfg = _base_.mini_300it.train_cfg
param_scheduler = _base_.mini_300it.param_scheduler
optim_wrapper = dict(
    optimizer=dict(lr=1e-3),
    paramwise_cfg=dict(layer_decay_rate=1.0),
    clip_grad=dict(max_norm=1.0))
default_hooks = _base_.mini_300it.default_hooks
log_processor = dict(by_epoch=False)
randomness = dict(seed=0)
# The lr above is for the mini dataloaders' batch of 4 on one process.
auto_scale_lr = dict(enable=False, base_batch_size=4)
