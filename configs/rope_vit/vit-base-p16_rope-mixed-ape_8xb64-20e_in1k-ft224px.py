# RoPE-Mixed + learnable APE ViT-B/16, DeiT-III stage 2 (see the RoPE-Mixed
# config).
_base_ = ['./vit-base-p16_rope-mixed_8xb64-20e_in1k-ft224px.py']

model = dict(backbone=dict(use_ape=True))
