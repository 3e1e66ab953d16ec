# Mini classification data for the CPU probing configs: circles, squares and
# triangles at 64^2 in mmpretrain's folder-per-class layout, written by
#   python tools/misc/make_mini_data.py data/mini --which cls --img-size 64
# Under unique names (the ImageNet probing base defines the dataloaders):
# the mini probing configs set `train_dataloader =
# _base_.mini_cls_train_dataloader` (its `_delete_` replaces the ImageNet
# dataset) and the same for `val_dataloader`; top-1 only.
mini_cls_train_dataloader = dict(
    batch_size=16,
    num_workers=0,
    persistent_workers=False,
    dataset=dict(
        _delete_=True,
        type='CustomDataset',
        data_root='data/mini/cls/',
        data_prefix='train',
        pipeline=[
            dict(type='LoadImageFromFile'),
            dict(type='RandomResizedCrop', scale=64,
                 crop_ratio_range=(0.5, 1.), backend='pillow'),
            dict(type='RandomFlip', prob=0.5, direction='horizontal'),
            dict(type='PackInputs'),
        ]))
mini_cls_val_dataloader = dict(
    mini_cls_train_dataloader,
    dataset=dict(
        mini_cls_train_dataloader['dataset'],
        data_prefix='val',
        pipeline=[
            dict(type='LoadImageFromFile'),
            dict(type='ResizeEdge', scale=64, edge='short', backend='pillow'),
            dict(type='PackInputs'),
        ]))
