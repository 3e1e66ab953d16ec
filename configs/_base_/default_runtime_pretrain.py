# Runtime shared by every mmpos pretraining config (mmpretrain scope):
# mmpretrain's _base_/default_runtime.py written out (so that this file has
# no base) plus the mmpos hooks. The model bases import mmpos
# (`custom_imports`).
default_scope = 'mmpretrain'
default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=50),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='IntactCheckpointHook', interval=1, max_keep_ckpts=3),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    visualization=dict(type='VisualizationHook', enable=False),
    check_loss=dict(type='NonFiniteLossHook'),
    rng_state=dict(type='RNGStateHook'),  # exact continuation on --resume
    # EMA teachers (DINOv2, ICPF, CR2PQ): set before training, updated
    # after every optimizer step, FSDP-aware; a no-op for other models
    ema_teacher=dict(type='EMATeacherHook'))
env_cfg = dict(
    cudnn_benchmark=False,
    mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
    dist_cfg=dict(backend='nccl'))
vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(type='UniversalVisualizer', vis_backends=vis_backends)
log_level = 'INFO'
load_from = None
resume = False
randomness = dict(seed=0, diff_rank_seed=True, deterministic=False)
