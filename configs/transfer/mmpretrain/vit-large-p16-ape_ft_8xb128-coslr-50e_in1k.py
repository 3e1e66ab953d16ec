# End-to-end fine-tuning of a ViT-L/16 (learnable APE, no RoPE) on
# ImageNet-1K with DropPos' recipe (A.1): the ViT-B/16 MAE fine-tuning
# recipe for 50 epochs (5 warm-up + 45 cosine) at batch 1024 (8 GPUs x 128),
# AdamW lr 1e-3 x 1024 / 256 = 4e-3, layer decay 0.8, drop path 0.1.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = './vit-base-p16-rope-mixed_ft_8xb128-coslr-100e_in1k.py'

model = dict(
    backbone=dict(arch='large', rope=None, use_ape=True),
    head=dict(in_channels=1024))
optim_wrapper = dict(
    optimizer=dict(lr=4e-3), paramwise_cfg=dict(layer_decay_rate=0.8))
param_scheduler = [
    _base_.param_scheduler[0],
    dict(_base_.param_scheduler[1], T_max=45, end=50)
]
train_cfg = dict(max_epochs=50)
