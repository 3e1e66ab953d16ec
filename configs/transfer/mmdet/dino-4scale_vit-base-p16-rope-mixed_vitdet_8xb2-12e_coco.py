# DINO-ViTDet 12 epochs (RoPE-ViT Table 1, detrex's setting): mmdet's 4-scale
# DINO on a windowed ViT-B/16 with RoPE-Mixed (14x14 windows, global blocks
# 3/6/9/12, RoPE at absolute coordinates, no class token), last block ->
# simple feature pyramid at strides 8/16/32 + a max-pooled 64 -> 1x1
# ChannelMapper with GroupNorm; LSJ 1024, batch 16 (8 GPUs x 2), 12 epochs,
# AdamW lr 1e-4, wd 0.1, layer decay 0.7, drop path 0.1, grad clip 0.1, lr
# x0.1 after epoch 11 (mmdet's DINO 12e).
# The paper's position schemes: model.backbone.rope.type (axial|mixed;
# rope=None: none) and model.backbone.use_ape (APE, Axial, Mixed,
# Axial+APE, Mixed+APE).
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    'mmdet::dino/dino-4scale_r50_8xb2-12e_coco.py',
    '../../_base_/models/rope-vit-base-p16_dense.py',
    '../../_base_/datasets/lsj-1024_pipelines.py',
    '../../_base_/schedules/vit_layer-decay_paramwise.py'
]

# detrex's DINO-ViTDet backbone: ViTDet's (windows, relative position bias,
# no class token, no LayerNorm after the last block) and its input padded to
# 1024x1024 with 0 after normalisation (square_pad; the LSJ pipeline has no
# Pad step).
model = dict(
    data_preprocessor=dict(pad_size_divisor=1024),
    backbone=dict(
        _delete_=True,
        **_base_.vit_backbone,
        **_base_.vitdet_window,
        out_indices=(-1, ),
        final_norm=False),
    neck=[
        dict(
            type='mmpretrain.SimpleFeaturePyramid',
            in_channels=768,
            out_channels=256,
            scale_factors=(2.0, 1.0, 0.5),
            num_outs=4),
        dict(
            type='ChannelMapper',
            in_channels=[256] * 4,
            kernel_size=1,
            out_channels=256,
            act_cfg=None,
            norm_cfg=dict(type='GN', num_groups=32),
            num_outs=4)
    ])
# LSJ without masks (DINO detects boxes only); box AP only.
train_dataloader = dict(
    dataset=dict(pipeline=[
        dict(t, with_mask=False) if t['type'] == 'LoadAnnotations' else t
        for t in _base_.lsj_train_pipeline
    ]))
val_dataloader = dict(
    dataset=dict(pipeline=[
        dict(t, with_mask=False) if t['type'] == 'LoadAnnotations' else t
        for t in _base_.lsj_test_pipeline
    ]))
test_dataloader = val_dataloader
optim_wrapper = dict(
    constructor='mmpretrain.LayerDecayOptimWrapperConstructor',
    optimizer=dict(lr=1e-4, weight_decay=0.1),
    paramwise_cfg=dict(
        _delete_=True, **_base_.vit_paramwise_cfg, layer_decay_rate=0.7))
auto_scale_lr = dict(base_batch_size=16)
# mmpos' hook: deletes old checkpoints only after the new one is complete
default_hooks = dict(checkpoint=dict(type='mmpretrain.IntactCheckpointHook'))
