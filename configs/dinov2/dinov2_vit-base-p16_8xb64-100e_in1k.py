# DINOv2† ViT-B/16 (Table 6): same recipe as ViT-S, 8 GPUs x 64.
_base_ = ['./dinov2_vit-small-p16_4xb128-100e_in1k.py']

embed_dims = 768
model = dict(
    backbone=dict(arch='base'),
    head=dict(in_channels=embed_dims),
    patch_head=dict(in_channels=embed_dims))
train_dataloader = dict(batch_size=64)
