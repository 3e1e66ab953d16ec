# Demo / test config: a tiny RoPE-Mixed ViT + UperNet trained from scratch on
# mini-ADE for a few hundred iterations on CPU, scored by IoUMetric.
_base_ = [
    '../_base_/models/upernet_vit-b16_mln.py',
    '../_base_/datasets/mini_ade.py',
    '../_base_/schedules/mmseg_adamw-layer-decay_160k.py',
    'mmseg::_base_/default_runtime.py',
    '../_base_/models/rope-vit_mini-arch.py',
]
crop_size = (128, 128)
embed_dims = _base_.mini_vit_arch['embed_dims']
norm_cfg = dict(type='BN', requires_grad=True)
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(
        arch=dict(_delete_=True, **_base_.mini_vit_arch),
        patch_size=8,
        drop_path_rate=0.,
        out_indices=(0, 1, 2, 3)),
    neck=dict(in_channels=embed_dims, norm_cfg=norm_cfg),
    decode_head=dict(
        in_channels=[embed_dims] * 4, channels=64, norm_cfg=norm_cfg),
    auxiliary_head=dict(in_channels=embed_dims, channels=32,
                        norm_cfg=norm_cfg),
    test_cfg=dict(mode='whole'))

max_iters = 300
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=30),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=30,
         end=max_iters)
]
optim_wrapper = dict(
    optimizer=dict(lr=1e-3), paramwise_cfg=dict(layer_decay_rate=1.0))
default_hooks = dict(
    logger=dict(interval=20),
    checkpoint=dict(interval=max_iters),
    visualization=dict(draw=False),
    check_loss=dict(type='mmpretrain.NonFiniteLossHook'))
randomness = dict(seed=0)
