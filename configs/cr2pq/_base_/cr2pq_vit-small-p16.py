# The CR2PQ model with a ViT-S/16 student (width 384, 6 heads) and a
# projector of the same width.
_base_ = ['./cr2pq_vit-base-p16.py']

model = dict(
    backbone=dict(arch='small'),
    neck=dict(embed_dims=384, num_heads=6, out_channels=384))
