# PaPE-RI (arXiv 2602.01418): one isotropic parabola per head, opened by the
# query token, an additive bias (patch frame), no rotation.
_base_ = ['../demo/droppos_vit-tiny-rope-mixed_mini.py']

model = dict(backbone=dict(rope=dict(type='pape_ri')))
