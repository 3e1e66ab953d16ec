# ComRoPE-LD (CVPR 2025): trainable commuting angle matrices, 8 x 8 blocks,
# positions scaled by 1 / 8 (the 8 x 8 training grid in [0, 1], as
# ComRoPE's code).
_base_ = ['./_base_/dinov2_mini.py']

model = dict(
    backbone=dict(rope=dict(type='comrope', variant='ld', block_size=8,
                            position_scale=1 / 8)))
