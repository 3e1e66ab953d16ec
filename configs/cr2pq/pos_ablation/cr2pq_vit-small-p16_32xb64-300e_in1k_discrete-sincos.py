# Table 6 "Discrete Sin-cos": the MAE-style single-view variant with sin-cos
# embeddings at integer grid positions, i.e. MAE with teacher targets.
_base_ = ['./cr2pq_vit-small-p16_32xb64-300e_in1k_continuous-sincos.py']
model = _base_.discrete
