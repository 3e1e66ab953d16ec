# Schedule of the mini pretraining configs (CPU, tens to hundreds of
# iterations on the mini unlabeled images): AdamW without decay on norms and
# biases, gradient clipping, linear warm-up then cosine, an iteration-based
# loop logging every few iterations and one checkpoint at the end. A config
# with another `max_iters` / `warmup_iters` restates `param_scheduler`,
# `train_cfg.max_iters` and the checkpoint interval.
# No base: the configs list ../default_runtime_pretrain.py beside this file
# and set `default_hooks = _base_.pretrain_mini_hooks` (merged over the
# runtime's hooks), which adds:
# - online_probe (OnlineProbeHook): DINO's weighted kNN (k = 20, T = 0.07)
#   on the frozen backbone (the EMA teacher's where there is one), memory =
#   the mini classification set's `train` split, queries = its `val` split,
#   every 50 iterations and after the last; logged as knn_cls_top1 /
#   knn_avg_top1 (chance: 33.3%). The set lies beside the pretraining
#   images: python tools/misc/make_mini_data.py data/mini --which cls.
#   Off: --cfg-options default_hooks.online_probe.interval=0
# - health_monitor (HealthMonitorHook): token cosines within / across images
#   and the effective rank of the (teacher) backbone's last-block tokens on
#   the first 16 images of the probe set's `val` split, before training,
#   every 50 iterations and after the last; <work_dir>/health.json holds the
#   history and the collapse verdict. DINO-style configs add the number of
#   prototypes (`num_prototypes`) for the teacher-entropy check.
# - encoder_tokens (EncoderTokensHook): the student encoder's tokens per
#   image (every view and crop through the backbone's first block in the
#   first iteration), written to <work_dir>/encoder_tokens.json.
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
probe_dataset = dict(
    type='CustomDataset', data_root='{train_data_root}/../cls')
pretrain_mini_hooks = dict(
    logger=dict(type='LoggerHook', interval=5),
    checkpoint=dict(type='IntactCheckpointHook', by_epoch=False,
                    interval=max_iters, max_keep_ckpts=1),
    online_probe=dict(
        type='OnlineProbeHook',
        train_dataset=dict(probe_dataset, data_prefix='train'),
        val_dataset=dict(probe_dataset, data_prefix='val'),
        interval=50),
    health_monitor=dict(
        type='HealthMonitorHook',
        dataset=dict(probe_dataset, data_prefix='val'),
        interval=50),
    encoder_tokens=dict(type='EncoderTokensHook'))
log_processor = dict(by_epoch=False)
