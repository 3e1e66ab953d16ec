# 160k iterations, AdamW lr 1e-4 wd 0.05, layer decay 0.65, 1.5k linear
# warm-up then poly (BEiT/MAE ADE20K recipe used by the papers).
_base_ = [
    'mmseg::_base_/schedules/schedule_160k.py',
    './vit_layer-decay_paramwise.py'
]

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    constructor='mmpretrain.LayerDecayOptimWrapperConstructor',
    optimizer=dict(
        type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.05),
    paramwise_cfg=dict(**_base_.vit_paramwise_cfg, layer_decay_rate=0.65))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0,
         end=1500),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=1500,
         end=160000)
]
# The lr above is for a total batch of 16 (4 GPUs x 4); tools/train.py
# --auto-scale-lr rescales it linearly for another total batch.
auto_scale_lr = dict(enable=False, base_batch_size=16)
# mmpos' hook: deletes old checkpoints only after the new one is complete
default_hooks = dict(checkpoint=dict(type='mmpretrain.IntactCheckpointHook'))
