# Demo / test config: a tiny RoPE-Mixed ViT + ViTDet-style Mask R-CNN trained
# from scratch on mini-COCO for a few hundred iterations on CPU, scored by
# CocoMetric.
_base_ = [
    '../_base_/models/mask-rcnn_vit-b16_simple-fpn.py',
    '../_base_/datasets/mini_coco_instance.py',
    '../_base_/schedules/mmdet_adamw-layer-decay_1x.py',
    'mmdet::_base_/default_runtime.py',
    '../_base_/models/rope-vit_mini-arch.py',
]
embed_dims = _base_.mini_vit_arch['embed_dims']
model = dict(
    backbone=dict(
        arch=dict(_delete_=True, **_base_.mini_vit_arch),
        patch_size=8,
        drop_path_rate=0.),
    # Stride-8 patches on 128px images: scales (2, 1, 1/2, 1/4) give 4..32.
    neck=dict(
        in_channels=embed_dims,
        out_channels=64,
        scale_factors=(2.0, 1.0, 0.5, 0.25)),
    rpn_head=dict(in_channels=64, feat_channels=64),
    roi_head=dict(
        bbox_roi_extractor=dict(out_channels=64),
        bbox_head=dict(in_channels=64, fc_out_channels=256, num_classes=3),
        mask_roi_extractor=dict(out_channels=64),
        mask_head=dict(in_channels=64, conv_out_channels=64, num_classes=3)),
    train_cfg=dict(rcnn=dict(sampler=dict(num=128))))

max_iters = 300
train_cfg = dict(
    _delete_=True, type='IterBasedTrainLoop', max_iters=max_iters,
    val_interval=max_iters)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=30),
    dict(type='CosineAnnealingLR', by_epoch=False, begin=30, end=max_iters,
         T_max=max_iters - 30)
]
optim_wrapper = dict(
    optimizer=dict(lr=1e-3),
    paramwise_cfg=dict(layer_decay_rate=1.0),
    clip_grad=dict(max_norm=1.0))
default_hooks = dict(
    logger=dict(interval=20),
    checkpoint=dict(by_epoch=False, interval=max_iters),
    visualization=dict(draw=False),
    check_loss=dict(type='mmpretrain.NonFiniteLossHook'))
log_processor = dict(by_epoch=False)
randomness = dict(seed=0)
