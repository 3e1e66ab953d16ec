# ViT-7B/16 -> ViT-B/16 with FSDP:
# distill_vit-7b-to-vit-small-p16_fsdp-16xb32-100e_in1k.py with the DINOv2
# recipe's ViT-B/16 student (768 wide, 12 blocks, 12 heads) and heads
# reading 768 channels; same teacher, crops, schedule and 16 GPUs x 32.
_base_ = ['./distill_vit-7b-to-vit-small-p16_fsdp-16xb32-100e_in1k.py']

embed_dims = 768
model = dict(
    backbone=dict(arch='base'),
    head=dict(in_channels=embed_dims),
    patch_head=dict(in_channels=embed_dims))
