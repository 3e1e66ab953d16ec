# RoPE-Mixed + learnable APE ViT-S/16 (paper Table 5, Fig. 6), same recipe.
_base_ = ['./vit-small-p16_rope-mixed_8xb256-400e_in1k.py']

model = dict(backbone=dict(use_ape=True))
