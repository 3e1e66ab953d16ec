# ViT-7B/16 -> ViT-L/16 with FSDP:
# distill_vit-7b-to-vit-small-p16_fsdp-16xb32-100e_in1k.py with the DINOv2
# recipe's ViT-L/16 student (1024 wide, 24 blocks, 16 heads) and heads
# reading 1024 channels; same teacher, crops, schedule and 16 GPUs x 32.
_base_ = ['./distill_vit-7b-to-vit-small-p16_fsdp-16xb32-100e_in1k.py']

embed_dims = 1024
model = dict(
    backbone=dict(arch='large'),
    head=dict(in_channels=embed_dims),
    patch_head=dict(in_channels=embed_dims))
