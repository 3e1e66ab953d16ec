# Unlabeled images written by tools/misc/make_mini_data.py (the demo and the
# tests' pretraining data). Pretraining configs override `pipeline`.
data_root = 'data/mini/unlabeled/'
mini_unlabeled_dataset = dict(
    type='CustomDataset', data_root=data_root, with_label=False, pipeline=[])
train_dataloader = dict(
    batch_size=8,
    num_workers=0,
    persistent_workers=False,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    dataset=mini_unlabeled_dataset)
