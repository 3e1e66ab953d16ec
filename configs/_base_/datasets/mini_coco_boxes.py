# mini-COCO (tools/misc/make_mini_data.py) for box-only detectors whose other
# base already defines the dataloaders (e.g. mmdet's DINO): unique names, to
# be spliced in by the config (train_dataloader=dict(**mini_coco_loader,
# dataset=dict(..., pipeline=mini_coco_box_train_pipeline)), native 128^2.
mini_coco_root = 'data/mini/coco/'
mini_coco_metainfo = dict(classes=('circle', 'square', 'triangle'))
mini_coco_loader = dict(batch_size=4, num_workers=0, persistent_workers=False)
mini_coco_box_train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(type='Resize', scale=(128, 128), keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs'),
]
mini_coco_box_test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(128, 128), keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(
        type='PackDetInputs',
        meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape',
                   'scale_factor'))
]
