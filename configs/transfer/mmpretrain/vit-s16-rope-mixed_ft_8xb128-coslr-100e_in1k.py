# End-to-end fine-tuning on ImageNet-1K (MAE recipe) with ViT-S/16 (384 wide)
# instead of ViT-B/16.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = './vit-b16-rope-mixed_ft_8xb128-coslr-100e_in1k.py'

model = _base_.vit_s16
