# Table 6 "Discrete Sin-cos": the MAE-style single-view variant with sin-cos
# embeddings at integer grid positions, i.e. MAE with teacher targets.
# Single view, masked, tokens out: see ./*_discrete-rope.py.
_base_ = ['../cr2pq_vit-small-p16_32xb64-300e_in1k.py']

model = dict(
    mask_ratio=0.75,
    backbone=dict(rope=None, use_ape=True, ape_type='sincos', out_type='raw'),
    neck=dict(pos_type='sincos'))
