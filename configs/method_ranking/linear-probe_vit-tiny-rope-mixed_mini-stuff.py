# CPU method ranking's primary metric (tools/paper_tables/method_ranking.py):
# the linear segmentation probe on mini-stuff. The frozen 4-block RoPE-Mixed
# mini ViT of the demo (patch 8, so one token per 8x8-pixel cell) -> BN +
# 1x1 conv per cell -> bilinear upsampling, 300 iterations; only the head
# trains, so the score is what the frozen features hold (DINOv2 §7.3
# "linear"). Pretrained backbone:
# --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../_base_/models/linear-probe_vit-base-p16.py',
    '../_base_/datasets/mini_stuff.py',
    '../_base_/schedules/mmseg_mini_300it.py',
]
custom_imports = dict(
    imports=['mmpos', 'mmpos_harness.mini_data.datasets'],
    allow_failed_imports=False)
embed_dims = 96
model = dict(
    data_preprocessor=dict(size=(64, 64)),
    backbone=dict(
        arch=dict(
            _delete_=True, embed_dims=96, num_layers=4, num_heads=3,
            feedforward_channels=384),
        patch_size=8,
        frozen_stages=4),
    decode_head=dict(in_channels=embed_dims, channels=embed_dims,
                     num_classes=8),
    test_cfg=dict(_delete_=True, mode='whole'))
