# DINO-ViTDet 12 epochs with a windowed ViT-L/16 (RoPE-ViT Table 1's ViT-L
# row): the ViT-B config with ViTDet's ViT-L (1024 wide, 24 blocks, global
# attention in blocks 6/12/18/24, drop path 0.4, layer decay 0.8, as
# ViTDet's and detrex's ViT-L configs) and the simple feature pyramid
# reading 1024 channels. Position schemes as in the ViT-B config.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = ['./dino-4scale_vit-base-p16-rope-mixed_vitdet_8xb2-12e_coco.py']

model = dict(
    backbone=dict(
        arch='large', drop_path_rate=0.4,
        global_attn_indexes=(5, 11, 17, 23)),
    neck=[dict(_base_.model.neck[0], in_channels=1024), _base_.model.neck[1]])
optim_wrapper = dict(paramwise_cfg=dict(layer_decay_rate=0.8))
