# RoPE-Axial ViT-L/16, DeiT-III stage 2: 20 epochs at 224 px from the stage-1
# checkpoint (vit-large-p16_rope-axial_8xb256-400e_in1k-192px.py), the
# ViT-B/16 recipe with a ViT-L encoder and DeiT-III's ViT-L fine-tuning drop
# path 0.45.
_base_ = ['./vit-base-p16_rope-mixed_8xb64-20e_in1k-ft224px.py']

model = dict(
    backbone=dict(arch='large', drop_path_rate=0.45, rope=dict(type='axial')),
    head=dict(in_channels=1024))
