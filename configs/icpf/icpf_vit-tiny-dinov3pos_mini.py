# ICPF on the mini images with DINOv3's position scheme added to the field
# (configs/_base_/models/rope-vit_dinov3-positions.py: normalised
# patch-centre RoPE with training-time coordinate rescale, rotate-half, 4
# registers, LayerScale) and view-consistent RoPE: every view's patches are
# rotated at their crop-box source coordinates, the boxes the positional
# field is cropped with (set view_consistent_rope=False for each view's own
# grid). Position-masked patches get neither field nor rotation. Everything
# else as icpf_vit-tiny_mini.py.
_base_ = [
    './icpf_vit-tiny_mini.py',
    '../_base_/models/rope-vit_dinov3-positions.py',
]

model = dict(
    # _delete_: the base backbone has no RoPE (rope=None)
    backbone=dict(_base_.dinov3_positions,
                  rope=dict(_delete_=True, type='dinov3')),
    view_consistent_rope=True)
