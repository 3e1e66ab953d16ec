# Linear probing on ImageNet-1K (MAE protocol) with ViT-S/16 (384 wide)
# instead of ViT-B/16.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = './vit-b16-rope-mixed_linear-probe_8xb2048-coslr-90e_in1k.py'

model = _base_.vit_s16
