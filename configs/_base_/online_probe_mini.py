# Online kNN probe of the mini pretraining runs (OnlineProbeHook), enabled
# as default_hooks.online_probe by schedules/pretrain_mini.py: DINO's
# weighted kNN (k = 20, T = 0.07) on the frozen backbone (the EMA teacher's
# where there is one), memory = the mini classification set's `train`
# split, queries = its `val` split, every 50 iterations and after the last;
# logged as knn_cls_top1 / knn_avg_top1 (chance: 33.3%). The set lies
# beside the pretraining images: python tools/misc/make_mini_data.py
# data/mini --which cls. Off: --cfg-options
# default_hooks.online_probe.interval=0
probe_dataset = dict(
    type='CustomDataset', data_root='{train_data_root}/../cls')
online_probe = dict(
    type='OnlineProbeHook',
    train_dataset=dict(probe_dataset, data_prefix='train'),
    val_dataset=dict(probe_dataset, data_prefix='val'),
    interval=50)
