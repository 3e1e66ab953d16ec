# The linear segmentation probe on mini-ADE (CPU): the frozen
# 4-block RoPE-Mixed mini ViT of the demo (patch 8) -> BN + 1x1 conv,
# 300 iterations. Pretrained backbone:
# --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../_base_/models/linear-probe_vit-base-p16.py',
    '../_base_/datasets/mini_ade.py',
    '../_base_/schedules/mmseg_mini_300it.py',
]
custom_imports = dict(
    imports=['mmpos', 'mmpos_harness.mini_data.datasets'],
    allow_failed_imports=False)
crop_size = (128, 128)
embed_dims = 96
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(
        arch=dict(
            _delete_=True, embed_dims=96, num_layers=4, num_heads=3,
            feedforward_channels=384),
        patch_size=8,
        frozen_stages=4),
    decode_head=dict(in_channels=embed_dims, channels=embed_dims),
    test_cfg=dict(_delete_=True, mode='whole'))
