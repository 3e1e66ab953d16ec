# CPU mini-benchmark (tools/benchmark/mini_benchmark.py): DINOv2's mini
# recipe (configs/dinov2/dinov2_vit-tiny_mini.py) with the demo detectors'
# backbone, the 4-block RoPE-Mixed ViT without APE (patch 8), so that every
# method transfers into the same Mask R-CNN / Semantic FPN.
_base_ = ['../dinov2/dinov2_vit-tiny_mini.py']
model = dict(backbone=dict(rope_type='mixed', use_ape=False))
