# The online dense probes of the mini pretraining runs (add this file to a
# pretraining config's _base_ and `custom_hooks = _base_.custom_hooks +
# _base_.dense_probe_hooks`): every 500 iterations and after the last,
# the linear depth probe on mini-NYU (OnlineDepthProbeHook: RMSE, abs-rel,
# delta < 1.25) and in-context retrieval on mini-stuff
# (OnlineRetrievalProbeHook: mIoU), both at 64 px (the 8-px-patch mini ViTs
# pretrain at 32 px: a 4 x 4 grid is too coarse for dense probes), beside
# the pretraining images: python tools/misc/make_mini_data.py data/mini
# --which nyu stuff --img-size 64. Off: --cfg-options (their indices in
# custom_hooks) custom_hooks.1.interval=0 custom_hooks.2.interval=0.
dense_probe_nyu = dict(type='NYUDataset', data_root='{train_data_root}/../nyu')
dense_probe_stuff = dict(
    type='MiniStuffDataset', data_root='{train_data_root}/../stuff')
dense_probe_hooks = [
    dict(
        type='OnlineDepthProbeHook',
        train_dataset=dict(dense_probe_nyu, data_prefix=dict(
            img_path='images/train', depth_map_path='annotations/train')),
        val_dataset=dict(dense_probe_nyu, data_prefix=dict(
            img_path='images/test', depth_map_path='annotations/test')),
        interval=500,
        img_size=64,
        crop_type=None),
    dict(
        type='OnlineRetrievalProbeHook',
        train_dataset=dict(dense_probe_stuff, data_prefix=dict(
            img_path='images/train', seg_map_path='annotations/train')),
        val_dataset=dict(dense_probe_stuff, data_prefix=dict(
            img_path='images/val', seg_map_path='annotations/val')),
        interval=500,
        img_size=64),
]
