# The 300-iteration CPU loop of the mini runs (demo and tests) as one dict,
# for configs whose other base (e.g. mmdet's DINO) already defines
# train_cfg / param_scheduler / default_hooks: 30 warm-up iterations then
# cosine, one validation and one checkpoint at the end, non-finite losses
# stop the run. ./mmdet_mini_300it.py splices it in.
mini_300it = dict(
    train_cfg=dict(
        _delete_=True, type='IterBasedTrainLoop', max_iters=300,
        val_interval=300),
    param_scheduler=[
        dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0,
             end=30),
        dict(type='CosineAnnealingLR', by_epoch=False, begin=30, end=300,
             T_max=270)
    ],
    default_hooks=dict(
        logger=dict(interval=20),
        checkpoint=dict(type='mmpretrain.IntactCheckpointHook', by_epoch=False,
                        interval=300),
        visualization=dict(draw=False),
        check_loss=dict(type='mmpretrain.NonFiniteLossHook')))
