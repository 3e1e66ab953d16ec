# Cayley-STRING (ICML 2025): RoPE-Mixed (base 10, patch frame) after a
# learned orthogonal change of basis per block and head, identity at init.
_base_ = ['../demo/droppos_vit-tiny-rope-mixed_mini.py']

model = dict(backbone=dict(rope=dict(type='string')))
