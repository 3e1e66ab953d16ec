# The linear depth probe trained inside mmseg's DepthEstimator
# (tools/train.py / tools/test.py, CPU): the demo's frozen 4-block
# RoPE-Mixed mini ViT (patch 8) -> last-block patch tokens (out_type
# 'featmap': this backbone gives no class-token pair, so no class token) ->
# LinearDepthHead (DINOv2: x4 bilinear, 1x1 conv to 256 UD bins in [1e-3,
# 10] m, linear normalisation, SigLoss) on mini-NYU at 64 px with random
# flips, 300 AdamW iterations; the authors' metrics (DinoDepthMetric of
# depth_mini-nyu.py). Pretrained backbone:
# --cfg-options model.backbone.init_cfg.checkpoint=PATH (a
# mmpos2backbone.py output or a training checkpoint's backbone).
_base_ = [
    './depth_mini-nyu.py',
    '../_base_/schedules/mmseg_mini_300it.py',
]
custom_imports = dict(imports=['mmpos'], allow_failed_imports=False)
default_scope = 'mmseg'
embed_dims = 96
model = dict(
    type='DepthEstimator',
    data_preprocessor=dict(
        type='SegDataPreProcessor',
        mean=[123.675, 116.28, 103.53],
        std=[58.395, 57.12, 57.375],
        bgr_to_rgb=True,
        size=(64, 64)),
    backbone=dict(
        type='mmpretrain.RoPEVisionTransformer',
        arch=dict(
            embed_dims=96, num_layers=4, num_heads=3,
            feedforward_channels=384),
        img_size=64,
        patch_size=8,
        rope=dict(type='mixed'),
        use_ape=False,
        drop_path_rate=0.,
        out_type='featmap',
        frozen_stages=4,
        init_cfg=dict(type='Pretrained', checkpoint=None,
                      prefix='backbone.')),
    decode_head=dict(
        type='mmpretrain.LinearDepthHead',
        in_channels=embed_dims,
        num_inputs=1,
        min_depth=1e-3,
        max_depth=10.,
        loss_decode=dict(type='mmpretrain.SigLoss', max_depth=10.)),
    test_cfg=dict(mode='whole'))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadDepthAnnotation', depth_rescale_factor=1e-3),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadDepthAnnotation', depth_rescale_factor=1e-3),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(
    batch_size=8, num_workers=0, persistent_workers=False,
    dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(
    num_workers=0, persistent_workers=False,
    dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
