# LieRE: learned skew-symmetric generators, 8 x 8 blocks, positions scaled
# by 1 / 7 (the 8 x 8 training grid from 0 to 1, as LieRE's code).
_base_ = ['./_base_/dinov2_mini.py']

model = dict(
    backbone=dict(rope=dict(type='liere', block_size=8,
                            position_scale=1 / 7)))
