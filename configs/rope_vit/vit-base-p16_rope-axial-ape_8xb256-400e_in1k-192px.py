# RoPE-Axial + learnable APE ViT-B/16 (RoPE-ViT Tables 1 and 3, Axial+APE),
# DeiT-III stage 1 (see the RoPE-Mixed config).
_base_ = ['./vit-base-p16_rope-mixed_8xb256-400e_in1k-192px.py']

model = dict(backbone=dict(rope=dict(type='axial'), use_ape=True))
