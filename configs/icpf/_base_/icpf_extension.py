# What ICPF adds to a DINOv2 config (Table 6). A leaf config lists this file
# next to its DINOv2 base, merges `icpf` into `model` and rebuilds DINOv2's
# multi-crop pipeline as MultiViewWithBoxes over DINOv2's view pipelines with
# the `box_recording` types: the same crops, flips and photometric
# augmentations, but every view records its crop box, and
# PackInputs(algorithm_keys=['crop_boxes']) puts the views' boxes ((V, 4),
# views in order) into the data samples, where ICPF reads them
# (`boxes_key`).
icpf = dict(
    type='ICPF',
    pos_field=dict(type='PositionalField', size=50),  # Table 4b: 19 or 50
    # Table 4a: distribution='const' | 'uniform' | 'beta'; None = off
    scale_aug=dict(
        distribution='beta', scale_range=(0.2, 1.0), beta=(2., 5.)),
    # Table 5b: (0.5, 0.5); (1., 0.) = 100% content; (0., 1.) = 100% position
    mask_split=(0.5, 0.5),
    pos_masking='cross',  # Table 5a: 'box' | 'cross'
    # Eq. 4 weighted like DINOv2's iBOT loss (divided by all 2B globals)
    pos_loss=dict(type='iBOTPatchLoss', student_temp=0.1,
                  normalize='all_images'),
    # A of §3.2.2 encloses all 10 views ('globals': the two global views)
    scale_box='all',
    boxes_key='crop_boxes')
# Table 3: no field sampling -> model.pos_field=None;
#          no L_pos          -> model.mask_split=(0.5, 0.)
box_recording = dict(
    RandomResizedCrop='RandomResizedCropWithBox',
    RandomFlip='RandomFlipWithBox')
