# DropPos ViT-S/16, 200 epochs: the ViT-B recipe (Table A) with the small
# encoder (width 384, 6 heads, as the authors' ViT-S model); same decoder.
_base_ = ['./droppos_vit-base-p16_8xb512-coslr-200e_in1k.py']

model = dict(
    backbone=dict(arch='small'),
    head=dict(in_channels=384))
