# CPU method ranking (tools/paper_tables/method_ranking.py): CR2PQ's mini
# recipe (configs/cr2pq/cr2pq_vit-tiny_mini.py) with the demo detectors'
# backbone, the 4-block RoPE-Mixed ViT without APE (patch 8), so that every
# method transfers into the same Mask R-CNN / Semantic FPN.
_base_ = ['../cr2pq/cr2pq_vit-tiny_mini.py']
# rope_theta None: RoPE-Mixed's default base (CR2PQ's 100 is for axial).
model = dict(
    backbone=dict(rope_type='mixed', rope_theta=None, use_ape=False))
