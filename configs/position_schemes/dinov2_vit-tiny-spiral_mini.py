# Spiral RoPE (arXiv 2602.03227): 4 directions, fixed frequencies (base 100,
# patch frame).
_base_ = ['./_base_/dinov2_mini.py']

model = dict(backbone=dict(rope=dict(type='spiral', num_directions=4)))
