# CPU method ranking (tools/paper_tables/method_ranking.py): CR2PQ's mini
# recipe (configs/cr2pq/cr2pq_vit-tiny_mini.py) with the demo detectors'
# backbone, the 4-block RoPE-Mixed ViT without APE (patch 8), so that every
# method transfers into the same Mask R-CNN / Semantic FPN.
_base_ = ['../cr2pq/cr2pq_vit-tiny_mini.py']
# _delete_: RoPE-Mixed's own base, not CR2PQ's theta 100 (for axial).
model = dict(
    backbone=dict(rope=dict(_delete_=True, type='mixed'), use_ape=False))
