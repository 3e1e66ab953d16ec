# Mini classification data for the CPU probing configs: circles, squares and
# triangles at 64^2 in mmpretrain's folder-per-class layout, written by
#   python tools/misc/make_mini_data.py data/mini --which cls --img-size 64
# The mini probing configs replace their ImageNet datasets with these
# (`dataset=dict(_delete_=True, **_base_.mini_cls_train)`); top-1 only.
mini_cls_root = 'data/mini/cls/'
mini_cls_train = dict(
    type='CustomDataset',
    data_root=mini_cls_root,
    data_prefix='train',
    pipeline=[
        dict(type='LoadImageFromFile'),
        dict(type='RandomResizedCrop', scale=64, crop_ratio_range=(0.5, 1.),
             backend='pillow'),
        dict(type='RandomFlip', prob=0.5, direction='horizontal'),
        dict(type='PackInputs'),
    ])
mini_cls_val = dict(
    mini_cls_train,
    data_prefix='val',
    pipeline=[
        dict(type='LoadImageFromFile'),
        dict(type='ResizeEdge', scale=64, edge='short', backend='pillow'),
        dict(type='PackInputs'),
    ])
mini_cls_loader = dict(batch_size=16, num_workers=0, persistent_workers=False)
