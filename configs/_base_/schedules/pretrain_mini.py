# Runtime and schedule of the mini pretraining configs (CPU, tens to
# hundreds of iterations on the mini unlabeled images), with the online kNN
# probe of ../online_probe_mini.py: AdamW without decay
# on norms and biases, gradient clipping, linear warm-up then cosine, an
# iteration-based loop logging every few iterations and one checkpoint at
# the end. A config with another `max_iters` / `warmup_iters` restates
# `param_scheduler`, `train_cfg.max_iters` and the checkpoint interval.
_base_ = ['../default_runtime_pretrain.py', '../online_probe_mini.py']

max_iters, warmup_iters = 60, 10
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=5e-4, betas=(0.9, 0.999),
                   weight_decay=0.05),
    clip_grad=dict(max_norm=3.0),
    paramwise_cfg=dict(norm_decay_mult=0., bias_decay_mult=0.))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0,
         end=warmup_iters),
    dict(type='CosineAnnealingLR', eta_min=1e-6, by_epoch=False,
         begin=warmup_iters, end=max_iters),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=5),
    checkpoint=dict(type='CheckpointHook', by_epoch=False,
                    interval=max_iters, max_keep_ckpts=1),
    online_probe=_base_.online_probe)
log_processor = dict(by_epoch=False)
