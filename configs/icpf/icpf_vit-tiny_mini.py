# ICPF on the mini unlabeled images: the DINOv2 mini recipe plus the
# positional field (cropped with each view's box, Beta(2, 5) scale
# augmentation) and cross-wise masked position prediction on the other half
# of the global-view images.
#
# PENDING: the views must carry their crop boxes (`crop_boxes`, (V, 4) in
# [0, 1] of the source image, x1 > x2 when flipped), i.e. `train_pipeline`
# must use the multi-view crop-box transforms of
# mmpos/datasets/transforms/crop_boxes.py in place of the inherited
# MultiView/RandomResizedCrop pipeline (which records no boxes).
_base_ = ['../dinov2/dinov2_vit-tiny_mini.py']

custom_imports = dict(
    imports=[
        'mmpos', 'mmpos.models.selfsup.dinov2', 'mmpos.models.selfsup.icpf',
        'mmpos.models.heads.dino_head', 'mmpos.models.losses.dino_losses',
        'mmpos.models.layers.positional_field',
        'mmpos.engine.hooks.dino_schedules_hook'
    ],
    allow_failed_imports=False)

model = dict(
    type='ICPF',
    pos_field=dict(type='PositionalField', size=50),
    scale_aug=dict(
        distribution='beta', scale_range=(0.2, 1.0), beta=(2., 5.)),
    mask_split=(0.5, 0.5),
    pos_masking='cross',
    pos_loss=dict(type='iBOTPatchLoss', student_temp=0.1),
    boxes_key='crop_boxes')
