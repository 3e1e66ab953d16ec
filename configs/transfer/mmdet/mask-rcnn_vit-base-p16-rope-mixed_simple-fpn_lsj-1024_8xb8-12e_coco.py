# ICPF B.2: ViTDet's Mask R-CNN (LayerNorm RoI heads, 2-conv RPN) on a
# ViT-B/16 with RoPE-Mixed (no APE) and GLOBAL attention in every block (as
# ICPF states), last block -> simple feature pyramid, 1024x1024 large-scale
# jitter, 12 epochs at batch 64 (8 GPUs x 8), AdamW lr 3e-4, wd 0.1, layer
# decay 0.7. AMP: --amp. Windowed ViTDet: vitdet_mask-rcnn_*.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../../_base_/models/mask-rcnn_vit-base-p16_simple-fpn.py',
    '../../_base_/datasets/coco_instance_lsj-1024.py',
    '../../_base_/schedules/mmdet_adamw-layer-decay_1x.py',
    'mmdet::_base_/default_runtime.py'
]

train_dataloader = dict(batch_size=8)
default_hooks = dict(
    checkpoint=dict(by_epoch=False, interval=2000, max_keep_ckpts=2))
log_processor = dict(by_epoch=False)
# ViTDet-style 12-epoch schedule (ICPF B.2; DropPos A.2 at batch 16 is the
# same 1x): total batch 64, 22,128 iterations, AdamW lr 3e-4 for ViT-B/16
# (1e-4 for ViT-S/16), weight decay 0.1, layer decay 0.7 (ViTDet), 250
# warm-up iterations, lr x0.1 at iterations 19,667 and 21,306.
max_iters = 22128
train_cfg = dict(
    _delete_=True,
    type='IterBasedTrainLoop',
    max_iters=max_iters,
    val_interval=max_iters)
optim_wrapper = dict(
    optimizer=dict(lr=3e-4, weight_decay=0.1),
    paramwise_cfg=dict(layer_decay_rate=0.7))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0,
         end=250),
    dict(type='MultiStepLR', by_epoch=False, begin=0, end=max_iters,
         milestones=[19667, 21306], gamma=0.1)
]
# The lr is set for the total batch of 64 (8 GPUs x 8); --auto-scale-lr
# rescales it for another one.
auto_scale_lr = dict(enable=False, base_batch_size=64)
