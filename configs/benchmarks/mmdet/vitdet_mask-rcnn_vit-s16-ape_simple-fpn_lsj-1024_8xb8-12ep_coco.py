# ViTDet-style Mask R-CNN, LSJ 1024, 12 epochs (ICPF B.2) with an APE
# ViT-S/16 (learnable absolute position embedding, no RoPE) instead of RoPE-
# Mixed.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = './vitdet_mask-rcnn_vit-s16-rope-mixed_simple-fpn_lsj-1024_8xb8-12ep_coco.py'

model = dict(backbone=dict(rope_type='none', use_ape=True))
