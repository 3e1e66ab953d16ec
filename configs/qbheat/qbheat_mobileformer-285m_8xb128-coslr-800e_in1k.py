# QB-Heat with Mobile-Former-285M on ImageNet-1K (Tab. 9): AdamW,
# lr = 1.5e-4 x 1024 / 256, wd 0.1, batch 1024 (8 GPUs x 128), cosine
# decay after 10 warm-up epochs, 256^2 RandomResizedCrop (+ flip, MAE's
# pipeline). Tab. 9 gives no epoch count; 800 is the middle of Fig. 6/
# Tab. 3's 200-2400 range (override `max_epochs` for the others).
_base_ = [
    './_base_/qbheat_mobileformer-285m.py',
    '../_base_/schedules/pretrain_amp_coslr_200e.py',
    '../_base_/datasets/imagenet_pretrain.py',
]

img_size = 256
data_root = 'data/imagenet/'
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=img_size,
         crop_ratio_range=(0.2, 1.0), backend='pillow',
         interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=128,
    dataset=dict(data_root=data_root, pipeline=train_pipeline))

max_epochs = 800
optim_wrapper = dict(
    optimizer=dict(lr=1.5e-4 * 1024 / 256, weight_decay=0.1),
    # no decay on norms, biases, global tokens and the A/B models
    paramwise_cfg=dict(
        norm_decay_mult=0.,
        bias_decay_mult=0.,
        custom_keys={
            'backbone.tokens': dict(decay_mult=0.),
            'neck.weight': dict(decay_mult=0.)
        }))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-4, by_epoch=True, begin=0,
         end=10, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', T_max=max_epochs - 10, by_epoch=True,
         begin=10, end=max_epochs, convert_to_iter_based=True)
]
train_cfg = dict(max_epochs=max_epochs)
auto_scale_lr = dict(base_batch_size=1024)
