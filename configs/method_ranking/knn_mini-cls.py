# The labelled sets of the CPU method ranking's kNN probe (python
# tools/analysis_tools/knn_eval.py CONFIG CHECKPOINT --data THIS_FILE):
# memory bank = the mini classification set's `train` split, queries = its
# `val` split (python tools/misc/make_mini_data.py data/mini --which cls).
default_scope = 'mmpretrain'
data_root = 'data/mini/cls'
train_dataloader = dict(
    dataset=dict(type='CustomDataset', data_root=data_root,
                 data_prefix='train', pipeline=[]))
val_dataloader = dict(
    dataset=dict(type='CustomDataset', data_root=data_root,
                 data_prefix='val', pipeline=[]))
