# ICPF ViT-S/16 on ImageNet-1K (Table 6): the DINOv2† recipe plus the 50x50
# positional field, Beta(2, 5) scale augmentation on [0.2, 1.0], cross-wise
# position masks (ratio [0.1, 0.5]) on the 50% of global views without
# content masks. Ablation switches: _base_/icpf_extension.py.
_base_ = [
    '../dinov2/dinov2_vit-small-p16_4xb128-100e_in1k.py',
    './_base_/icpf_extension.py'
]

model = _base_.icpf
# DINOv2's multi-crop views (2 global 224px with asymmetric blur /
# solarisation, 8 local 96px), each recording its crop box.
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='MultiViewWithBoxes',
        num_views=[1, 1, 8],
        transforms=[[
            dict(step, type=_base_.box_recording.get(step.type, step.type))
            for step in view
        ] for view in _base_.view_pipelines]),
    dict(type='PackInputs', algorithm_keys=['crop_boxes']),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
