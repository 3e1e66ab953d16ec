# DINO-Swin 12 epochs (RoPE-ViT Table 2, detrex's setting = mmdet's DINO 12e):
# mmdet's 4-scale DINO on RoPE-Swin-T (../../_base_/models/rope-swin-t.py;
# window 7 as pretrained), stages 2-4 -> 1x1 ChannelMapper + a strided level;
# DETR multi-scale augmentation, batch 16 (8 GPUs x 2), AdamW lr 1e-4
# (backbone x0.1), wd 1e-4, drop path 0.2, lr x0.1 after epoch 11.
# Position schemes: model.backbone.rope x model.backbone.use_rpb
# (RPB alone: dino-4scale_swin-t-rpb_8xb2-12e_coco.py).
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    'mmdet::dino/dino-4scale_r50_8xb2-12e_coco.py',
    '../../_base_/models/rope-swin-t.py'
]

custom_imports = dict(imports=['mmpos'], allow_failed_imports=False)
model = dict(
    backbone=dict(_base_.rope_swin_t, out_indices=(1, 2, 3),
                  drop_path_rate=0.2),
    neck=dict(in_channels=[192, 384, 768]))
# mmpos' hook: deletes old checkpoints only after the new one is complete
default_hooks = dict(checkpoint=dict(type='mmpretrain.IntactCheckpointHook'))
