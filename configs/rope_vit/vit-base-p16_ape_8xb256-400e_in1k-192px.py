# APE ViT-B/16 baseline, DeiT-III stage 1 (see the RoPE-Mixed config).
_base_ = ['./vit-base-p16_rope-mixed_8xb256-400e_in1k-192px.py']

model = dict(backbone=dict(rope=None, use_ape=True))
