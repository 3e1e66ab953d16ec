# ImageNet-1K train split for self-supervised pretraining (no labels used).
# Configs set `train_dataloader.dataset.pipeline` and the batch size.
train_dataloader = dict(
    batch_size=64,
    num_workers=8,
    persistent_workers=True,
    pin_memory=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='ImageNet', data_root='data/imagenet/', split='train'))
