# Golden Gate RoPE (jerryxio.ng/posts/nd-rope): fixed frequencies, every
# channel pair of every head on its own direction (2-D R-sequence), magnitudes
# geometric from 0.01 to 1 radian per patch (patch frame).
_base_ = ['./_base_/dinov2_mini.py']

model = dict(backbone=dict(rope=dict(type='golden_gate')))
