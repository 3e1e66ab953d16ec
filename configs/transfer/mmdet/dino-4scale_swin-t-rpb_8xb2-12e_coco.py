# DINO-Swin 12 epochs (RoPE-ViT Table 2) with Swin-T's relative position bias
# and no RoPE (the table's "RPB" column; equal to mmpretrain's Swin).
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = './dino-4scale_swin-t-rope-mixed_8xb2-12e_coco.py'

model = dict(backbone=dict(rope=None, use_rpb=True))
