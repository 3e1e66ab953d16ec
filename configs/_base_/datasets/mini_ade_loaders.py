# mini-ADE (tools/misc/make_mini_data.py) under unique names, for configs
# whose other base already defines ADE20K's dataloaders (e.g. mmseg's
# Mask2Former): splice in with train_dataloader =
# _base_.mini_ade_train_dataloader (./mini_ade.py does so on mmseg's ADE20K
# base). ADE20K layout and label convention (0 = ignore,
# reduce_zero_label=True), read by MiniADEDataset (ADE20KDataset with the 6
# classes mini-ADE draws); leaf configs add 'mmpos_harness.mini_data.datasets'
# to `custom_imports`.
mini_ade_root = 'data/mini/ade/'
mini_ade_train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(
        type='RandomResize',
        scale=(256, 128),
        ratio_range=(0.75, 1.5),
        keep_ratio=True),
    dict(type='RandomCrop', crop_size=(128, 128), cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs')
]
mini_ade_test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(256, 128), keep_ratio=True),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs')
]
mini_ade_loader = dict(batch_size=4, num_workers=0, persistent_workers=False)
mini_ade_dataset = dict(type='MiniADEDataset', data_root=mini_ade_root)
mini_ade_train_dataloader = dict(
    **mini_ade_loader,
    dataset=dict(**mini_ade_dataset, pipeline=mini_ade_train_pipeline))
mini_ade_val_dataloader = dict(
    **mini_ade_loader,
    dataset=dict(**mini_ade_dataset, pipeline=mini_ade_test_pipeline))
