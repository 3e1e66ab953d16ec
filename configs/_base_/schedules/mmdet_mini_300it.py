# Short CPU schedule for mmdet detectors on mini-COCO (demo and tests): 300
# iterations, AdamW lr 1e-3 without layer decay, 30 warm-up iterations then
# cosine, gradient clipping, one validation and one checkpoint at the end,
# non-finite losses stop the run.
_base_ = [
    'mmdet::_base_/schedules/schedule_1x.py',
    'mmdet::_base_/default_runtime.py', './vit_layer-decay_paramwise.py'
]

max_iters = 300
train_cfg = dict(
    _delete_=True, type='IterBasedTrainLoop', max_iters=300, val_interval=300)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=30),
    dict(type='CosineAnnealingLR', by_epoch=False, begin=30, end=300,
         T_max=270)
]
# mmdet_adamw-layer-decay_1x.py's AdamW at lr 1e-3, no layer decay, clipped
optim_wrapper = dict(
    _delete_=True, type='OptimWrapper', clip_grad=dict(max_norm=1.0),
    constructor='mmpretrain.LayerDecayOptimWrapperConstructor',
    optimizer=dict(type='AdamW', lr=1e-3, betas=(0.9, 0.999),
                   weight_decay=0.05),
    paramwise_cfg=dict(**_base_.vit_paramwise_cfg, layer_decay_rate=1.0))
default_hooks = dict(
    logger=dict(interval=20),
    checkpoint=dict(type='mmpretrain.IntactCheckpointHook', by_epoch=False,
                    interval=300),
    visualization=dict(draw=False),
    check_loss=dict(type='mmpretrain.NonFiniteLossHook'))
log_processor = dict(by_epoch=False)
randomness = dict(seed=0)
# The lr above is for the mini dataloaders' batch of 4 on one process.
auto_scale_lr = dict(enable=False, base_batch_size=4)
