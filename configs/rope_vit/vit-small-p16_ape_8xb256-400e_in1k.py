# Baseline ViT-S/16 with learnable APE and no RoPE, same recipe.
_base_ = ['./vit-small-p16_rope-mixed_8xb256-400e_in1k.py']

model = dict(backbone=dict(rope=None, use_ape=True))
