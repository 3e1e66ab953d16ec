# Table 6 "Discrete RoPE": the MAE-style single-view variant with RoPE at
# integer grid positions in the student and the positional queries.
_base_ = [
    '../cr2pq_vit-small-p16_32xb64-300e_in1k.py',
    '../_base_/pos_ablation_switches.py',
]
model = _base_.discrete
