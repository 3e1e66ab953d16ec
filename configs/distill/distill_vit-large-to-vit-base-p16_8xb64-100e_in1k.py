# ViT-L/16 -> ViT-B/16: distill_vit-large-to-vit-small-p16_8xb64-100e_in1k.py
# with the DINOv2 recipe's ViT-B/16 student (768 wide, 12 blocks, 12 heads;
# ../dinov2/dinov2_vit-base-p16_8xb64-100e_in1k.py) and heads reading 768
# channels; same teacher, crops, schedule and 8 GPUs x 64.
_base_ = ['./distill_vit-large-to-vit-small-p16_8xb64-100e_in1k.py']

embed_dims = 768
model = dict(
    backbone=dict(arch='base'),
    head=dict(in_channels=embed_dims),
    patch_head=dict(in_channels=embed_dims))
