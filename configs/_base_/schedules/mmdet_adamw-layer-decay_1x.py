# 12 epochs, AdamW lr 3e-4 wd 0.05 with layer-wise lr decay (CR2PQ Table 1).
_base_ = [
    'mmdet::_base_/schedules/schedule_1x.py', './vit_layer-decay_paramwise.py'
]

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    constructor='mmpretrain.LayerDecayOptimWrapperConstructor',
    optimizer=dict(
        type='AdamW', lr=3e-4, betas=(0.9, 0.999), weight_decay=0.05),
    paramwise_cfg=dict(**_base_.vit_paramwise_cfg, layer_decay_rate=0.75))
