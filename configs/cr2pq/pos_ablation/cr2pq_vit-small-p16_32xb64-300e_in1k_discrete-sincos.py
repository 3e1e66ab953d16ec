# Table 6 "Discrete Sin-cos": the MAE-style single-view variant with sin-cos
# embeddings at integer grid positions, i.e. MAE with teacher targets.
_base_ = [
    '../cr2pq_vit-small-p16_32xb64-300e_in1k.py',
    '../_base_/pos_ablation_switches.py',
]
# both switches
model = dict(
    _base_.sincos,
    mask_ratio=_base_.discrete.mask_ratio,
    backbone=dict(_base_.sincos.backbone, **_base_.discrete.backbone))
