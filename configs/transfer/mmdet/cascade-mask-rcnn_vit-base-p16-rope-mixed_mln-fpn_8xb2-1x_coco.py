# Cascade Mask R-CNN, ViT-B/16 with RoPE-Mixed (no APE), blocks 4/6/8/12 ->
# DeconvMultiLevelNeck -> FPN, 1x (12 epochs) on COCO at batch 16 (8 GPUs x 2):
# CR2PQ Table 1 (AdamW lr 3e-4, wd 0.05, layer decay 0.75). AMP: --amp.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../../_base_/models/cascade-mask-rcnn_vit-base-p16_mln-fpn.py',
    'mmdet::_base_/datasets/coco_instance.py',
    '../../_base_/schedules/mmdet_adamw-layer-decay_1x.py',
    'mmdet::_base_/default_runtime.py'
]
# mmpos' hook: deletes old checkpoints only after the new one is complete
default_hooks = dict(checkpoint=dict(type='mmpretrain.IntactCheckpointHook'))
