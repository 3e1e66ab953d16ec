# PaPE (arXiv 2602.01418): 50 parabolas per head whose opening and slope
# the query token sets, an additive bias (patch frame), no rotation.
_base_ = ['../demo/droppos_vit-tiny-rope-mixed_mini.py']

model = dict(backbone=dict(rope=dict(type='pape', parabolas=50)))
