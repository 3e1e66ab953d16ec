# mini-ADE written by tools/misc/make_mini_data.py: ADE20K layout and label
# convention (0 = ignore, reduce_zero_label=True), read by MiniADEDataset
# (ADE20KDataset with the 6 classes mini-ADE draws). Leaf configs add
# 'mmpos.datasets.mini_datasets' to `custom_imports`.
_base_ = ['mmseg::_base_/datasets/ade20k.py']

data_root = 'data/mini/ade/'
crop_size = (128, 128)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(
        type='RandomResize',
        scale=(256, 128),
        ratio_range=(0.75, 1.5),
        keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs')
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(256, 128), keep_ratio=True),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs')
]
train_dataloader = dict(
    batch_size=4,
    num_workers=0,
    persistent_workers=False,
    dataset=dict(
        type='MiniADEDataset', data_root=data_root,
        pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=4,
    num_workers=0,
    persistent_workers=False,
    dataset=dict(
        type='MiniADEDataset', data_root=data_root,
        pipeline=test_pipeline))
test_dataloader = val_dataloader
