# Frozen-backbone Deformable DETR probing on the mini COCO (CPU): the COCO
# probing model (frozen Mobile-Former-285M, three levels, 100 queries) with a
# 64-d transformer of 1 encoder + 2 decoder layers, 128^2 images, 3 epochs,
# scored by the real CocoMetric (bbox). DETR heads keep the top-scoring (query,
# class) pairs with no score threshold, so even an almost untrained decoder
# hands CocoMetric boxes and it always reports an AP (low, but measured).
# Checkpoint:
#   --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = ['./deformable-detr_mobileformer-285m-frozen_8xb2-500e_coco.py']

dims = 64
ffn = dict(embed_dims=dims, feedforward_channels=2 * dims)
model = dict(
    neck=dict(out_channels=dims),
    encoder=dict(
        num_layers=1,
        layer_cfg=dict(self_attn_cfg=dict(embed_dims=dims), ffn_cfg=ffn)),
    decoder=dict(
        num_layers=2,
        layer_cfg=dict(
            self_attn_cfg=dict(embed_dims=dims, num_heads=4),
            cross_attn_cfg=dict(embed_dims=dims),
            ffn_cfg=ffn)),
    positional_encoding=dict(num_feats=dims // 2),
    bbox_head=dict(num_classes=3, embed_dims=dims))

# mini COCO (tools/misc/make_mini_data.py), boxes only, native 128^2
data_root = 'data/mini/coco/'
metainfo = dict(classes=('circle', 'square', 'triangle'))
image_scale = (128, 128)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(type='Resize', scale=image_scale, keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs'),
]
test_pipeline = _base_.test_pipeline
test_pipeline[1].scale = image_scale
mini_loader = dict(batch_size=4, num_workers=0, persistent_workers=False)
train_dataloader = dict(
    **mini_loader,
    dataset=dict(data_root=data_root, metainfo=metainfo,
                 pipeline=train_pipeline))
val_dataloader = dict(
    **mini_loader,
    dataset=dict(data_root=data_root, metainfo=metainfo,
                 pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=data_root + 'annotations/instances_val2017.json')
test_evaluator = val_evaluator

max_epochs = 3
train_cfg = dict(max_epochs=max_epochs, val_interval=max_epochs)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=5)
]
optim_wrapper = dict(optimizer=dict(lr=1e-3))
default_hooks = dict(logger=dict(interval=5),
                     checkpoint=dict(interval=max_epochs))
randomness = dict(seed=0)
