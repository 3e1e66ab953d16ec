# Table 6 "Discrete RoPE": the MAE-style single-view variant with RoPE at
# integer grid positions in the student and the positional queries.
# The paper trains the discrete rows MAE-style on one view ("the discrete
# position can not represent the relative positions of two views"): 75% of
# view A's patches masked, the visible ones at their integer positions
# predict the teacher's tokens of the masked ones (view B is loaded but
# unused); the student returns its tokens (out_type='raw').
_base_ = ['../cr2pq_vit-small-p16_32xb64-300e_in1k.py']

model = dict(mask_ratio=0.75, backbone=dict(out_type='raw'))
