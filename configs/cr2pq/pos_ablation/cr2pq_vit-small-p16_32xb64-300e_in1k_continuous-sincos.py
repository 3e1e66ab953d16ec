# Table 6 "Continuous Sin-cos": two views as CR2PQ, the queries get sin-cos
# embeddings of Eq. 4's continuous coordinates, the student sin-cos APE.
_base_ = ['../cr2pq_vit-small-p16_32xb64-300e_in1k.py']

model = dict(
    backbone=dict(rope=None, use_ape=True, ape_type='sincos'),
    neck=dict(pos_type='sincos'))
