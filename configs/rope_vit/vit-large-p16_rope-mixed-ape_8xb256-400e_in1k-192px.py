# RoPE-Mixed + learnable APE ViT-L/16 (RoPE-ViT Fig. 4, Tables 1 and 3),
# DeiT-III stage 1: the ViT-B/16 RoPE-Mixed recipe at 192 px (400 epochs,
# LAMB lr 3e-3, batch 2048) with a ViT-L encoder (1024 wide, 24 blocks, 16
# heads) and DeiT-III's ViT-L drop path 0.4. Stage 2:
# vit-large-p16_rope-mixed-ape_8xb64-20e_in1k-ft224px.py.
_base_ = ['./vit-base-p16_rope-mixed_8xb256-400e_in1k-192px.py']

model = dict(
    backbone=dict(arch='large', drop_path_rate=0.4, use_ape=True),
    head=dict(in_channels=1024))
