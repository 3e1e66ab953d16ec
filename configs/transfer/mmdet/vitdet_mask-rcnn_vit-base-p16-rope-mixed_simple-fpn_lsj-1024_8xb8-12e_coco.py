# ViTDet Mask R-CNN (Li et al. 2022), ViT-B/16 with RoPE-Mixed (no APE): 14x14
# window attention in every block but the global blocks 3/6/9/12 (RoPE at
# absolute image coordinates), no class token, last block -> simple feature
# pyramid, LayerNorm RoI heads; LSJ 1024, 12 epochs at batch 64. Other position
# schemes: model.backbone.rope.type (axial|mixed; rope=None: none) and
# model.backbone.use_ape. Memory: model.backbone.with_cp=True. Pretrained
# checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = './mask-rcnn_vit-base-p16-rope-mixed_simple-fpn_lsj-1024_8xb8-12e_coco.py'

model = dict(backbone=_base_.vitdet_window)
