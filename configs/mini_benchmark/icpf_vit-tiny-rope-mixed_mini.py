# CPU mini-benchmark (tools/benchmark/mini_benchmark.py): ICPF's mini
# recipe (configs/icpf/icpf_vit-tiny_mini.py) with the demo detectors'
# backbone, the 4-block RoPE-Mixed ViT without APE (patch 8), so that every
# method transfers into the same Mask R-CNN / Semantic FPN.
_base_ = ['../icpf/icpf_vit-tiny_mini.py']
model = dict(backbone=dict(rope_type='mixed', use_ape=False))
