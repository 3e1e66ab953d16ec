# LieRE: learned skew-symmetric generators, 8 x 8 blocks, positions scaled
# by 1 / 3 (the 4 x 4 training grid from 0 to 1, as LieRE's code).
_base_ = ['../demo/droppos_vit-tiny-rope-mixed_mini.py']

model = dict(
    backbone=dict(rope=dict(type='liere', block_size=8,
                            position_scale=1 / 3)))
