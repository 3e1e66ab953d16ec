# Large-scale jitter at 1024x1024 (ViTDet, DropPos A.2, ICPF B.2, detrex's
# DINO-ViTDet): random rescale of the 1024 square by 0.1-2.0, a 1024 crop that
# may hold no box, tiny boxes dropped (mmdet's LSJ pipeline). No Pad step:
# as ViTDet (detectron2 pads the normalised batch with 0, i.e. the mean
# colour, to `square_pad=1024`), the detectors' data_preprocessor pads with
# `pad_size_divisor=1024` and its default pad_value 0 after normalisation
# (mmdet's LSJ configs pad the raw image with 114 instead).
# Named lsj_* so that configs whose other base defines train_pipeline (mmdet's
# DINO) can take them; detectors without masks switch `with_mask` off.
lsj_image_size = (1024, 1024)
lsj_train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(
        type='RandomResize',
        scale=lsj_image_size,
        ratio_range=(0.1, 2.0),
        keep_ratio=True),
    dict(
        type='RandomCrop',
        crop_type='absolute_range',
        crop_size=lsj_image_size,
        recompute_bbox=True,
        allow_negative_crop=True),
    dict(type='FilterAnnotations', min_gt_bbox_wh=(1e-2, 1e-2)),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs')
]
lsj_test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=lsj_image_size, keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(
        type='PackDetInputs',
        meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape',
                   'scale_factor'))
]
