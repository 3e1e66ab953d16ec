# LookHere (NeurIPS 2024): LH-180 directed masks with distance penalties
# (patch frame), no rotation.
_base_ = ['../demo/droppos_vit-tiny-rope-mixed_mini.py']

model = dict(backbone=dict(rope=dict(type='lookhere', fov=180)))
