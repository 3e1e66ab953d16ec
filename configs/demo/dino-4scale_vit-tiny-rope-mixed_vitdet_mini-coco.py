# Demo / test config: DINO-ViTDet (the RoPE-ViT Table 1 protocol) shrunk for
# CPU: the tiny RoPE-Mixed ViT with stride-8 patches and 6x6 window attention
# (the 16x16 grid of a 128px image padded to 18x18) in blocks 1 and 3,
# global blocks 2 and 4, simple feature pyramid at strides 8..64, DINO with
# 1 encoder + 2 decoder layers (256-d: mmdet's DINO decoder fixes it), 256-d
# FFNs, 30 queries and 10 denoising queries, trained from scratch on
# mini-COCO and scored by the real CocoMetric (bbox). Checkpoint:
#   --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../transfer/mmdet/dino-4scale_vit-base-p16-rope-mixed_vitdet_8xb2-12e_coco.py'  # noqa: E501
]

ffn = dict(feedforward_channels=256)  # DINO's widths stay 256
model = dict(
    num_queries=30,
    # ViTDet's square pad after normalisation, at the mini images' 128 px
    data_preprocessor=dict(pad_size_divisor=128),
    backbone=dict(
        arch=dict(
            _delete_=True, embed_dims=96, num_layers=4, num_heads=3,
            feedforward_channels=384),
        patch_size=8,
        img_size=128,
        pretrain_img_size=32,  # the mini pretraining crops
        drop_path_rate=0.,
        window_size=6,
        global_attn_indexes=(1, 3)),
    # stride-8 patches: scales (1, 1/2, 1/4) + max-pool give strides 8..64
    neck=[dict(_base_.model.neck[0],
               in_channels=96,
               scale_factors=(1.0, 0.5, 0.25)), _base_.model.neck[1]],
    encoder=dict(num_layers=1, layer_cfg=dict(ffn_cfg=ffn)),
    decoder=dict(num_layers=2, layer_cfg=dict(ffn_cfg=ffn)),
    bbox_head=dict(num_classes=3),
    dn_cfg=dict(group_cfg=dict(num_dn_queries=10)),
    test_cfg=dict(max_per_img=50))  # top-k of the 30 x 3 (query, class)

# mini-COCO (tools/misc/make_mini_data.py), boxes only, native 128^2
# (`__` names are this file's own: mmengine leaves them out of the config)
__loader = dict(batch_size=4, num_workers=0, persistent_workers=False)
__mini_coco = dict(data_root='data/mini/coco/',
                   metainfo=dict(classes=('circle', 'square', 'triangle')))
train_dataloader = dict(
    **__loader,
    dataset=dict(
        **__mini_coco,
        filter_cfg=dict(filter_empty_gt=True, min_size=4),
        pipeline=[
            dict(type='LoadImageFromFile'),
            dict(type='LoadAnnotations', with_bbox=True),
            dict(type='Resize', scale=(128, 128), keep_ratio=True),
            dict(type='RandomFlip', prob=0.5),
            dict(type='PackDetInputs'),
        ]))
val_dataloader = dict(
    **__loader,
    dataset=dict(
        **__mini_coco,
        pipeline=[
            dict(type='LoadImageFromFile'),
            dict(type='Resize', scale=(128, 128), keep_ratio=True),
            dict(type='LoadAnnotations', with_bbox=True),
            dict(
                type='PackDetInputs',
                meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape',
                           'scale_factor'))
        ]))
test_dataloader = val_dataloader
val_evaluator = dict(
    ann_file='data/mini/coco/annotations/instances_val2017.json')
test_evaluator = val_evaluator

# the mini runs' 300-iteration loop (../_base_/schedules/mmdet_mini_300it.py)
train_cfg = dict(
    _delete_=True, type='IterBasedTrainLoop', max_iters=300, val_interval=300)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=30),
    dict(type='CosineAnnealingLR', by_epoch=False, begin=30, end=300,
         T_max=270)
]
optim_wrapper = dict(
    optimizer=dict(lr=5e-4, weight_decay=1e-4),
    paramwise_cfg=dict(layer_decay_rate=1.0))
auto_scale_lr = dict(base_batch_size=4)
default_hooks = dict(
    logger=dict(interval=20),
    checkpoint=dict(type='mmpretrain.IntactCheckpointHook', by_epoch=False,
                    interval=300),
    visualization=dict(draw=False),
    check_loss=dict(type='mmpretrain.NonFiniteLossHook'))
log_processor = dict(by_epoch=False)
randomness = dict(seed=0)
