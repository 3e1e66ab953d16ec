# Short CPU schedule for mmdet detectors on mini-COCO (demo and tests): 300
# iterations, AdamW lr 1e-3 without layer decay, 30 warm-up iterations then
# cosine, gradient clipping, one validation at the end.
_base_ = [
    'mmdet::_base_/schedules/schedule_1x.py',
    'mmdet::_base_/default_runtime.py', './mini_300it_loop.py',
    './vit_layer-decay_paramwise.py'
]

max_iters = _base_.mini_300it.train_cfg.max_iters
train_cfg = _base_.mini_300it.train_cfg
param_scheduler = _base_.mini_300it.param_scheduler
# mmdet_adamw-layer-decay_1x.py's AdamW at lr 1e-3, no layer decay, clipped
optim_wrapper = dict(
    _delete_=True, type='OptimWrapper', clip_grad=dict(max_norm=1.0),
    constructor='mmpretrain.LayerDecayOptimWrapperConstructor',
    optimizer=dict(type='AdamW', lr=1e-3, betas=(0.9, 0.999),
                   weight_decay=0.05),
    paramwise_cfg=dict(**_base_.vit_paramwise_cfg, layer_decay_rate=1.0))
default_hooks = _base_.mini_300it.default_hooks
log_processor = dict(by_epoch=False)
randomness = dict(seed=0)
# The lr above is for the mini dataloaders' batch of 4 on one process.
auto_scale_lr = dict(enable=False, base_batch_size=4)
