# LookHere (NeurIPS 2024): LH-180 directed masks with distance penalties
# (patch frame), no rotation.
_base_ = ['./_base_/dinov2_mini.py']

model = dict(backbone=dict(rope=dict(type='lookhere', fov=180)))
