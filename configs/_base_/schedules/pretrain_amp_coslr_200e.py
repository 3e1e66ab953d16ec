# Runtime and schedule of the epoch-based ImageNet pretraining recipes
# (DropPos, QB-Heat): mixed-precision AdamW with betas (0.9, 0.95), linear
# warm-up over 10 epochs then cosine to epoch 200 (stepped per iteration),
# a log line every 100 iterations, a checkpoint per epoch, resumable.
# Configs set lr / weight decay and restate `param_scheduler` and
# `train_cfg` for another `max_epochs`.
_base_ = ['../default_runtime_pretrain.py']

max_epochs, warmup_epochs = 200, 10
optim_wrapper = dict(
    type='AmpOptimWrapper',
    loss_scale='dynamic',
    optimizer=dict(type='AdamW', betas=(0.9, 0.95)))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-4, by_epoch=True, begin=0,
         end=warmup_epochs, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', T_max=max_epochs - warmup_epochs,
         by_epoch=True, begin=warmup_epochs, end=max_epochs,
         convert_to_iter_based=True)
]
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=max_epochs)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=100),
    checkpoint=dict(type='IntactCheckpointHook', interval=1, max_keep_ckpts=3))
resume = True
