# Short CPU schedule for mmseg segmentors on mini-ADE (demo and tests): 300
# iterations, AdamW lr 1e-3 without layer decay, 30 warm-up iterations then
# poly, one validation at the end.
_base_ = [
    'mmseg::_base_/schedules/schedule_160k.py',
    'mmseg::_base_/default_runtime.py', './vit_layer-decay_paramwise.py'
]

max_iters = 300
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=30),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=30,
         end=max_iters)
]
# mmseg_adamw-layer-decay_160k.py's AdamW at lr 1e-3, no layer decay
optim_wrapper = dict(
    _delete_=True, type='OptimWrapper',
    constructor='mmpretrain.LayerDecayOptimWrapperConstructor',
    optimizer=dict(type='AdamW', lr=1e-3, betas=(0.9, 0.999),
                   weight_decay=0.05),
    paramwise_cfg=dict(**_base_.vit_paramwise_cfg, layer_decay_rate=1.0))
default_hooks = dict(
    logger=dict(interval=20),
    checkpoint=dict(type='mmpretrain.IntactCheckpointHook', interval=max_iters),
    visualization=dict(draw=False),
    check_loss=dict(type='mmpretrain.NonFiniteLossHook'))
randomness = dict(seed=0)
# The lr above is for the mini dataloaders' batch of 4 on one process.
auto_scale_lr = dict(enable=False, base_batch_size=4)
