# Demo / test config: DINO-ViTDet (the RoPE-ViT Table 1 protocol) shrunk for
# CPU: the tiny RoPE-Mixed ViT with stride-8 patches and 6x6 window attention
# (the 16x16 grid of a 128px image padded to 18x18) in blocks 1 and 3,
# global blocks 2 and 4, simple feature pyramid at strides 8..64, DINO with
# 1 encoder + 2 decoder layers (256-d: mmdet's DINO decoder fixes it), 256-d
# FFNs, 30 queries and 10 denoising queries, trained from scratch on
# mini-COCO and scored by the real CocoMetric (bbox). Checkpoint:
#   --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../transfer/mmdet/dino-4scale_vit-base-p16-rope-mixed_vitdet_8xb2-12e_coco.py',  # noqa: E501
    '../_base_/models/rope-vit_mini-arch.py',
    '../_base_/datasets/mini_coco_boxes.py',
    '../_base_/schedules/mini_300it_loop.py'
]

ffn = dict(feedforward_channels=256)  # DINO's widths stay 256
model = dict(
    num_queries=30,
    # ViTDet's square pad after normalisation, at the mini images' 128 px
    data_preprocessor=dict(pad_size_divisor=128),
    backbone=dict(
        arch=dict(_delete_=True, **_base_.mini_vit_arch),
        patch_size=8,
        drop_path_rate=0.,
        window_size=6,
        global_attn_indexes=(1, 3)),
    # stride-8 patches: scales (1, 1/2, 1/4) + max-pool give strides 8..64
    neck=[dict(_base_.model.neck[0],
               in_channels=_base_.mini_vit_arch['embed_dims'],
               scale_factors=(1.0, 0.5, 0.25)), _base_.model.neck[1]],
    encoder=dict(num_layers=1, layer_cfg=dict(ffn_cfg=ffn)),
    decoder=dict(num_layers=2, layer_cfg=dict(ffn_cfg=ffn)),
    bbox_head=dict(num_classes=3),
    dn_cfg=dict(group_cfg=dict(num_dn_queries=10)),
    test_cfg=dict(max_per_img=50))  # top-k of the 30 x 3 (query, class)

train_dataloader = dict(
    **_base_.mini_coco_loader,
    dataset=dict(
        data_root=_base_.mini_coco_root,
        metainfo=_base_.mini_coco_metainfo,
        filter_cfg=dict(filter_empty_gt=True, min_size=4),
        pipeline=_base_.mini_coco_box_train_pipeline))
val_dataloader = dict(
    **_base_.mini_coco_loader,
    dataset=dict(
        data_root=_base_.mini_coco_root,
        metainfo=_base_.mini_coco_metainfo,
        pipeline=_base_.mini_coco_box_test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(
    ann_file=_base_.mini_coco_root + 'annotations/instances_val2017.json')
test_evaluator = val_evaluator

train_cfg = _base_.mini_300it.train_cfg
param_scheduler = _base_.mini_300it.param_scheduler
optim_wrapper = dict(
    optimizer=dict(lr=5e-4, weight_decay=1e-4),
    paramwise_cfg=dict(layer_decay_rate=1.0))
auto_scale_lr = dict(base_batch_size=4)
default_hooks = _base_.mini_300it.default_hooks
log_processor = dict(by_epoch=False)
randomness = dict(seed=0)
