# ICPF on the mini unlabeled images: the DINOv2 mini recipe (4-block ViT,
# 2 x 64px + 2 x 32px views, schedules) plus the 50 x 50 positional field
# cropped with each view's box (Beta(2, 5) scale augmentation) and
# cross-wise masked position prediction on the other half of the global-view
# images.
# vs ImageNet: everything DINOv2's mini config changes (see
# ../dinov2/dinov2_vit-tiny_mini.py: tiny ViT, 64 / 32px crops, 256
# prototypes, mini batch and schedule), for the same reasons; the positional
# field and its masking are ICPF's as on ImageNet.
_base_ = ['../dinov2/dinov2_vit-tiny_mini.py', './_base_/icpf_extension.py']

model = _base_.icpf
# DINOv2's views, each recording its crop box (see _base_/icpf_extension.py).
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='MultiViewWithBoxes',
        num_views=[2, 2],
        transforms=[[
            dict(step, type=_base_.box_recording.get(step.type, step.type))
            for step in view
        ] for view in (_base_.global_view, _base_.local_view)]),
    dict(type='PackInputs', algorithm_keys=['crop_boxes']),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
