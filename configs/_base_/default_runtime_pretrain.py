# Runtime shared by every mmpos pretraining config (mmpretrain scope). The
# model bases list the mmpos modules they need in `custom_imports`.
_base_ = ['mmpretrain::_base_/default_runtime.py']

default_hooks = dict(
    logger=dict(type='LoggerHook', interval=50),
    checkpoint=dict(type='IntactCheckpointHook', interval=1, max_keep_ckpts=3),
    check_loss=dict(type='NonFiniteLossHook'),
    rng_state=dict(type='RNGStateHook'),  # exact continuation on --resume
    # EMA teachers (DINOv2, ICPF, CR2PQ): set before training, updated
    # after every optimizer step, FSDP-aware; a no-op for other models
    ema_teacher=dict(type='EMATeacherHook'))
randomness = dict(seed=0, diff_rank_seed=True)
