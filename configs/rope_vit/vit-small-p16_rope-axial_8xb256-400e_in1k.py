# RoPE-Axial ViT-S/16 (fixed frequencies, theta 100), same recipe.
_base_ = ['./vit-small-p16_rope-mixed_8xb256-400e_in1k.py']

model = dict(backbone=dict(rope=dict(type='axial')))
