# ComRoPE-LD (CVPR 2025): trainable commuting angle matrices, 8 x 8 blocks,
# positions scaled by 1 / 4 (the 4 x 4 training grid in [0, 1], as
# ComRoPE's code).
_base_ = ['../demo/droppos_vit-tiny-rope-mixed_mini.py']

model = dict(
    backbone=dict(rope=dict(type='comrope', variant='ld', block_size=8,
                            position_scale=1 / 4)))
