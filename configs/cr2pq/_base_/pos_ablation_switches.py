# The Table 6 switches of the pos_ablation/ configs, merged into `model`.
#
# Discrete rows: the paper trains them MAE-style on one view ("the discrete
# position can not represent the relative positions of two views"): 75% of
# view A's patches masked, the visible ones at their integer positions
# predict the teacher's tokens of the masked ones (view B is loaded but
# unused). The student must return its tokens (out_type='raw').
discrete = dict(mask_ratio=0.75, backbone=dict(out_type='raw'))
# Sin-cos rows: fixed 2-D sin-cos embeddings (no rotation) in the student
# (APE) and the positional queries.
sincos = dict(
    backbone=dict(rope=None, use_ape=True, ape_type='sincos'),
    neck=dict(pos_type='sincos'))
