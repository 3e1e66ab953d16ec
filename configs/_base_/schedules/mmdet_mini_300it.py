# Short CPU schedule for mmdet detectors on mini-COCO (demo and tests): 300
# iterations, AdamW lr 1e-3 without layer decay, 30 warm-up iterations then
# cosine, gradient clipping, one validation at the end.
_base_ = ['./mmdet_adamw-layer-decay_1x.py', 'mmdet::_base_/default_runtime.py']

max_iters = 300
train_cfg = dict(
    _delete_=True, type='IterBasedTrainLoop', max_iters=max_iters,
    val_interval=max_iters)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=30),
    dict(type='CosineAnnealingLR', by_epoch=False, begin=30, end=max_iters,
         T_max=max_iters - 30)
]
optim_wrapper = dict(
    optimizer=dict(lr=1e-3),
    paramwise_cfg=dict(layer_decay_rate=1.0),
    clip_grad=dict(max_norm=1.0))
default_hooks = dict(
    logger=dict(interval=20),
    checkpoint=dict(by_epoch=False, interval=max_iters),
    visualization=dict(draw=False),
    check_loss=dict(type='mmpretrain.NonFiniteLossHook'))
log_processor = dict(by_epoch=False)
randomness = dict(seed=0)
# The lr above is for the mini dataloaders' batch of 4 on one process.
auto_scale_lr = dict(enable=False, base_batch_size=4)
