# Mask R-CNN MLN+FPN 1x (CR2PQ Table 1) with ViT-S/16 (384 wide) instead of
# ViT-B/16.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = './mask-rcnn_vit-base-p16-rope-mixed_mln-fpn_8xb2-1x_coco.py'

model = _base_.mln_fpn_vit_s16
