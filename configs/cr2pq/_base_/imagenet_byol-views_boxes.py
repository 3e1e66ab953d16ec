# ImageNet-1K with the two BYOL views of byol-views_boxes.py.
_base_ = [
    '../../_base_/datasets/imagenet_pretrain.py',
    './byol-views_boxes.py',
]

train_dataloader = dict(dataset=dict(pipeline=_base_.train_pipeline))
