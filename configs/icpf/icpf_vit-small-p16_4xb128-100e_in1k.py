# ICPF ViT-S/16 on ImageNet-1K (Table 6): the DINOv2† recipe plus the 50x50
# positional field, Beta(2, 5) scale augmentation on [0.2, 1.0], cross-wise
# position masks (ratio [0.1, 0.5]) on the 50% of global views without
# content masks.
#
# PENDING: as in icpf_vit-tiny_mini.py, `train_pipeline` must use the
# crop-box multi-view transforms (mmpos/datasets/transforms/crop_boxes.py)
# so that every sample carries `crop_boxes`.
_base_ = ['../dinov2/dinov2_vit-small-p16_4xb128-100e_in1k.py']

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
    pos_field=dict(type='PositionalField', size=50),  # Table 4b: 19 or 50
    # Table 4a: distribution='const' | 'uniform' | 'beta'
    scale_aug=dict(
        distribution='beta', scale_range=(0.2, 1.0), beta=(2., 5.)),
    # Table 5b: (0.5, 0.5); (1., 0.) = 100% content; (0., 1.) = 100% position
    mask_split=(0.5, 0.5),
    pos_masking='cross',  # Table 5a: 'box' | 'cross'
    pos_loss=dict(type='iBOTPatchLoss', student_temp=0.1))
# Table 3: no field sampling -> model.pos_field=None;
#          no L_pos          -> model.mask_split=(0.5, 0.)
