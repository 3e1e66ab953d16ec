# Schedule of the mini pretraining configs (CPU, tens to hundreds of
# iterations on the mini unlabeled images), with an online kNN probe: AdamW
# without decay
# on norms and biases, gradient clipping, linear warm-up then cosine, an
# iteration-based loop logging every few iterations and one checkpoint at
# the end. A config with another `max_iters` / `warmup_iters` restates
# `param_scheduler`, `train_cfg.max_iters` and the checkpoint interval.
# No base: the configs list ../default_runtime_pretrain.py beside this file
# and set `default_hooks = _base_.pretrain_mini_hooks` (or the 300-iteration
# variant's, `pretrain_mini_300it` below).
# Online kNN probe of the mini pretraining runs (OnlineProbeHook), enabled
# as default_hooks.online_probe by `pretrain_mini_hooks` below: DINO's
# weighted kNN (k = 20, T = 0.07) on the frozen backbone (the EMA teacher's
# where there is one), memory = the mini classification set's `train`
# split, queries = its `val` split, every 50 iterations and after the last;
# logged as knn_cls_top1 / knn_avg_top1 (chance: 33.3%). The set lies
# beside the pretraining images: python tools/misc/make_mini_data.py
# data/mini --which cls. Off: --cfg-options
# default_hooks.online_probe.interval=0
probe_dataset = dict(
    type='CustomDataset', data_root='{train_data_root}/../cls')
online_probe = dict(
    type='OnlineProbeHook',
    train_dataset=dict(probe_dataset, data_prefix='train'),
    val_dataset=dict(probe_dataset, data_prefix='val'),
    interval=50)
# Collapse monitors of every mini pretraining run (HealthMonitorHook, in
# `pretrain_mini_hooks` below so that every mini config has them): token
# cosines within / across images and the effective rank of the (teacher)
# backbone's last-block tokens on the first 16 images of the probe set's
# `val` split, before training, every 50 iterations and after the last;
# <work_dir>/health.json holds the history and the collapse verdict that
# the method ranking's table shows. DINO-style configs add the number of
# prototypes (`num_prototypes`) for the teacher-entropy check.
health_monitor = dict(
    type='HealthMonitorHook',
    dataset=dict(probe_dataset, data_prefix='val'),
    interval=50)

# The student encoder's tokens per image (EncoderTokensHook: every view and
# crop through the backbone's first block in the first iteration), written
# to <work_dir>/encoder_tokens.json; the method ranking shows it beside the
# image budget.
encoder_tokens = dict(type='EncoderTokensHook')

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
pretrain_mini_hooks = dict(
    logger=dict(type='LoggerHook', interval=5),
    checkpoint=dict(type='IntactCheckpointHook', by_epoch=False,
                    interval=max_iters, max_keep_ckpts=1),
    online_probe=online_probe,
    health_monitor=health_monitor,
    encoder_tokens=encoder_tokens)
log_processor = dict(by_epoch=False)
# The 300-iteration mini pretraining schedule of the masked-image methods
# (DropPos' mini config, MAE in the method ranking): the above with
# AdamW lr 1e-3 and MAE's betas (0.9, 0.95), 20 warm-up iterations then
# cosine to 1e-5, logging every 10 iterations and one checkpoint at the end.
# Their configs take batches of 32 from an InfiniteSampler and set
# `train_cfg`, `param_scheduler`, `default_hooks` and
# `optim_wrapper.optimizer` from it.
pretrain_mini_300it = dict(
    train_cfg=dict(max_iters=300),
    optimizer=dict(lr=1e-3, betas=(0.9, 0.95)),
    param_scheduler=[
        dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0,
             end=20),
        dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=False,
             begin=20, end=300),
    ],
    default_hooks=dict(
        pretrain_mini_hooks,
        logger=dict(type='LoggerHook', interval=10),
        checkpoint=dict(type='IntactCheckpointHook', by_epoch=False, interval=300,
                        max_keep_ckpts=2)))
