# mini-stuff written by tools/misc/make_mini_data.py (--which stuff):
# texture-defined regions of 8 materials (MiniStuffDataset's metainfo, 255
# ignored), 64px images, scored by mmseg's IoUMetric. Leaf configs add
# 'mmpos_harness.mini_data.datasets' to `custom_imports`.
data_root = 'data/mini/stuff/'
crop_size = (64, 64)
dataset_type = 'MiniStuffDataset'
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs')
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs')
]
train_dataloader = dict(
    batch_size=4,
    num_workers=0,
    persistent_workers=False,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        data_prefix=dict(
            img_path='images/train', seg_map_path='annotations/train'),
        pipeline=train_pipeline))
val_dataloader = dict(
    train_dataloader,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        train_dataloader['dataset'],
        data_prefix=dict(
            img_path='images/val', seg_map_path='annotations/val'),
        pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator
