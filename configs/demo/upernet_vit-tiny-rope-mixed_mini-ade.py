# Demo / test config: a tiny RoPE-Mixed ViT + UperNet trained from scratch on
# mini-ADE for a few hundred iterations on CPU, scored by IoUMetric.
_base_ = [
    '../_base_/models/upernet_vit-base-p16_mln.py',
    '../_base_/datasets/mini_ade.py',
    '../_base_/schedules/mmseg_mini_300it.py',
]
custom_imports = dict(
    imports=['mmpos', 'mmpos_harness.mini_data.datasets'],
    allow_failed_imports=False)
crop_size = (128, 128)
embed_dims = 96
norm_cfg = dict(type='BN', requires_grad=True)
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(
        arch=dict(
            _delete_=True, embed_dims=96, num_layers=4, num_heads=3,
            feedforward_channels=384),
        patch_size=8,
        drop_path_rate=0.,
        out_indices=(0, 1, 2, 3)),
    neck=dict(in_channels=embed_dims, norm_cfg=norm_cfg),
    decode_head=dict(
        in_channels=[embed_dims] * 4, channels=64, num_classes=6,
        norm_cfg=norm_cfg),
    auxiliary_head=dict(in_channels=embed_dims, channels=32, num_classes=6,
                        norm_cfg=norm_cfg),
    test_cfg=dict(_delete_=True, mode='whole'))
