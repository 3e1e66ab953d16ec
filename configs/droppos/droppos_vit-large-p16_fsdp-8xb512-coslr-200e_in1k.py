# DropPos ViT-L/16 with FSDP (Table 5's ViT-L row, 200 epochs):
# the ViT-B 200-epoch recipe with a ViT-L encoder (1024 wide, 24 blocks,
# 16 heads) and the position decoder reading 1024 channels, trained by
# mmengine's FlexibleRunner with FSDP (../_base_/fsdp.py: one FSDP unit per
# transformer block, full state-dict checkpoints). Gradient clipping under
# FSDP acts on each process's shard of a tensor (PerTensorClipOptimWrapper
# clips what a rank holds), not on the whole tensor as in the authors' DDP
# run.
_base_ = [
    './droppos_vit-base-p16_8xb512-coslr-200e_in1k.py', '../_base_/fsdp.py'
]

model = dict(backbone=dict(arch='l'), head=dict(in_channels=1024))
