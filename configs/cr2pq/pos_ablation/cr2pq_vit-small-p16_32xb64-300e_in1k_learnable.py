# Table 6 "Learnable": two views as CR2PQ, a 2-layer MLP maps Eq. 4's
# coordinates (x, y) to the queries' additive embedding; the student has a
# learnable APE (no weight decay on it).
_base_ = ['../cr2pq_vit-small-p16_32xb64-300e_in1k.py']
model = dict(
    backbone=dict(rope=None, use_ape=True, ape_type='learnable'),
    neck=dict(pos_type='mlp'))
optim_wrapper = dict(
    paramwise_cfg=dict(custom_keys={'pos_embed': dict(decay_mult=0.)}))
