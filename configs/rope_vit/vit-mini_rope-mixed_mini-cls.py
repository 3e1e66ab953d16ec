# The ViT-S RoPE-Mixed DeiT-III recipe (same optimiser, loss, Mixup/CutMix,
# 3-Augment, repeated augmentation) shrunk to the mini classification set
# (tools/misc/make_mini_data.py data/mini --which cls --img-size 64): a
# 4-block ViT with 8-px patches on 64-px images, 3 classes, 30 short
# epochs on CPU. Other variants:
# --cfg-options model.backbone.rope.type=axial / model.backbone.use_ape=True.
_base_ = ['./vit-small-p16_rope-mixed_8xb256-400e_in1k.py']

img_size = 64
model = dict(
    backbone=dict(
        # the mini ViT of the demo
        arch=dict(_delete_=True, embed_dims=96, num_layers=4, num_heads=3,
                  feedforward_channels=384),
        img_size=img_size,
        patch_size=8),
    head=dict(num_classes=3, in_channels=96, loss=dict(loss_weight=1 / 3)))
data_preprocessor = dict(num_classes=3)

train_pipeline = [
    dict(step, scale=img_size, crop_ratio_range=(0.35, 1.))
    if step['type'] == 'RandomResizedCrop' else step
    for step in _base_.train_pipeline
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=img_size, edge='short', backend='pillow',
         interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=img_size),
    dict(type='PackInputs'),
]
data_root = 'data/mini/cls/'
# One loader for both splits of the mini set.
train_dataloader, val_dataloader = (
    dict(batch_size=16, num_workers=0, persistent_workers=False,
         dataset=dict(_delete_=True, type='CustomDataset',
                      data_root=data_root, data_prefix=split,
                      pipeline=pipeline))
    for split, pipeline in [('train', train_pipeline), ('val', test_pipeline)])
test_dataloader = val_dataloader
val_evaluator = dict(type='Accuracy', topk=(1, ))
test_evaluator = val_evaluator

param_scheduler = [
    dict(type='LinearLR', start_factor=0.1, by_epoch=True, begin=0, end=2,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=2,
         end=30),
]
train_cfg = dict(max_epochs=30, val_interval=10)
default_hooks = dict(
    logger=dict(interval=10),
    checkpoint=dict(interval=10, max_keep_ckpts=1))
auto_scale_lr = dict(base_batch_size=16)
