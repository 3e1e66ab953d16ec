# ICPF B.2: ViTDet's Mask R-CNN (LayerNorm RoI heads, 2-conv RPN) on a
# ViT-B/16 with RoPE-Mixed (no APE) and GLOBAL attention in every block (as
# ICPF states), last block -> simple feature pyramid, 1024x1024 large-scale
# jitter, 12 epochs at batch 64 (8 GPUs x 8), AdamW lr 3e-4, wd 0.1, layer
# decay 0.7. AMP: --amp. Windowed ViTDet: vitdet_mask-rcnn_*.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../../_base_/models/mask-rcnn_vit-b16_simple-fpn.py',
    '../../_base_/datasets/coco_instance_lsj-1024.py',
    '../../_base_/schedules/mmdet_vitdet_adamw-layer-decay_12e.py',
    'mmdet::_base_/default_runtime.py'
]

train_dataloader = dict(batch_size=8)
default_hooks = dict(
    checkpoint=dict(by_epoch=False, interval=2000, max_keep_ckpts=2))
log_processor = dict(by_epoch=False)
