# RoPE-Mixed ViT-B/16, DeiT-III stage 1: 400 epochs at 192 px (lr 3e-3,
# drop path 0.1), evaluated at 224 (RoPE needs no interpolation). Stage 2 is
# vit-base-p16_rope-mixed_8xb64-20e_in1k-ft224px.py.
_base_ = ['./vit-small-p16_rope-mixed_8xb256-400e_in1k.py']

model = dict(
    backbone=dict(arch='base', img_size=192, drop_path_rate=0.1),
    head=dict(in_channels=768))
train_pipeline = [
    dict(step, scale=192) if step['type'] == 'RandomResizedCrop' else step
    for step in _base_.train_pipeline
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
optim_wrapper = dict(optimizer=dict(lr=3e-3))
