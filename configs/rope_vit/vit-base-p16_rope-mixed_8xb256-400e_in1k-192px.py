# RoPE-Mixed ViT-B/16, DeiT-III stage 1: 400 epochs at 192 px (lr 3e-3,
# drop path 0.1), evaluated at 224 (RoPE needs no interpolation). Stage 2 is
# vit-base-p16_rope-mixed_8xb64-20e_in1k-ft224px.py.
_base_ = ['./vit-small-p16_rope-mixed_8xb256-400e_in1k.py']

model = dict(
    backbone=dict(arch='base', img_size=192, drop_path_rate=0.1),
    head=dict(in_channels=768))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=192, crop_ratio_range=(0.08, 1.),
         backend='pillow', interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    {{_base_.three_augment}},
    {{_base_.color_jitter}},
    dict(type='PackInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
optim_wrapper = dict(optimizer=dict(lr=3e-3))
