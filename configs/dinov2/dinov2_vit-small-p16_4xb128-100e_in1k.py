# DINOv2 on ImageNet-1K as reproduced by the ICPF paper (DINOv2†, Table 6):
# ViT-S/16, 2 global 224px + 8 local 96px crops, 100 epochs, AdamW,
# total batch 512 (4 GPUs x 128), 65536 prototypes, separate heads.
_base_ = [
    '../_base_/default_runtime_pretrain.py',
    '../_base_/datasets/imagenet_pretrain.py',
]

custom_imports = dict(imports=['mmpos'], allow_failed_imports=False)

embed_dims = 384
head = dict(
    type='DINOProjectionHead',
    in_channels=embed_dims,
    out_channels=65536,
    hidden_channels=2048,
    bottleneck_channels=256,
    num_layers=3,
    norm_last_layer=True)
model = dict(
    type='DINOv2',
    backbone=dict(
        type='RoPEVisionTransformer',
        arch='small',
        img_size=224,
        patch_size=16,
        rope=None,
        use_ape=True,
        out_type='raw',
        layer_scale_init_value=1e-5,  # DINOv2's LayerScale (ls1, ls2)
        drop_path_rate=0.1),  # linear over the blocks: [0, 0.1]
    head=head,
    patch_head=head,  # separate heads: True
    image_loss=dict(type='DINOLoss', student_temp=0.1),
    # DINOv2's weighting: masked-token losses divided by all 2B global
    # images, KoLeo summed over the two globals
    patch_loss=dict(type='iBOTPatchLoss', student_temp=0.1,
                    normalize='all_images'),
    koleo_loss=dict(type='KoLeoLoss', loss_weight=1.0),
    koleo_reduction='sum',
    centering=dict(type='TeacherCentering', mode='sinkhorn', n_iters=3),
    teacher_temp=0.04,  # constant (Table 6)
    teacher_momentum=0.992,  # -> 1, cosine
    mask_ratio_range=(0.1, 0.5),  # on 50% of the images (mask_sample_prob)
    content_masking='box',
    data_preprocessor=dict(
        type='SelfSupDataPreprocessor',
        mean=[123.675, 116.28, 103.53],
        std=[58.395, 57.12, 57.375],
        to_rgb=True))

# DINO multi-crop augmentation (hue jitter off: mmcv 2.1.0's adjust_hue
# overflows with numpy 2).
color_jitter = dict(
    type='RandomApply',
    transforms=[
        dict(type='ColorJitter', brightness=0.4, contrast=0.4,
             saturation=0.2, hue=0.)
    ],
    prob=0.8)
grayscale = dict(
    type='RandomGrayscale', prob=0.2, keep_channels=True,
    channel_weights=(0.114, 0.587, 0.2989))


def blur(prob):
    return dict(type='GaussianBlur', magnitude_range=(0.1, 2.0),
                magnitude_std='inf', prob=prob)


# bicubic resizing, as DINOv2's torchvision RandomResizedCrop (mmpretrain's
# default is bilinear)
global_crop = dict(type='RandomResizedCrop', scale=224,
                   crop_ratio_range=(0.32, 1.), backend='pillow',
                   interpolation='bicubic')
local_crop = dict(type='RandomResizedCrop', scale=96,
                  crop_ratio_range=(0.05, 0.32), backend='pillow',
                  interpolation='bicubic')
flip = dict(type='RandomFlip', prob=0.5)
view_pipelines = [
    [global_crop, flip, color_jitter, grayscale, blur(1.0)],
    [global_crop, flip, color_jitter, grayscale, blur(0.1),
     dict(type='Solarize', thr=128, prob=0.2)],
    [local_crop, flip, color_jitter, grayscale, blur(0.5)],
]
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='MultiView', num_views=[1, 1, 8], transforms=view_pipelines),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=128,
    num_workers=10,
    drop_last=True,
    dataset=dict(pipeline=train_pipeline))

# AdamW; Table 6's base lr 2e-3 scaled as DINOv2 does, by sqrt(batch / 1024)
# for the total batch of 512. No layer-wise / patch-embedding lr decay.
max_epochs, warmup_epochs = 100, 10
optim_wrapper = dict(
    type='AmpOptimWrapper',
    dtype='bfloat16',
    optimizer=dict(
        type='AdamW', lr=2e-3 * (512 / 1024)**0.5, betas=(0.9, 0.999),
        weight_decay=0.04),
    clip_grad=dict(max_norm=3.0),
    # DINOv2: no weight decay on biases, norms and LayerScale gammas (the
    # only other 1-D tensors); tokens, APE and field are decayed
    paramwise_cfg=dict(norm_decay_mult=0., bias_decay_mult=0.,
                       flat_decay_mult=0.))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-4, by_epoch=True, begin=0,
         end=warmup_epochs, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-6, by_epoch=True,
         begin=warmup_epochs, end=max_epochs, convert_to_iter_based=True),
    # weight decay 0.04 -> 0.4 (cosine); the ratio keeps no-decay groups at 0
    dict(type='CosineAnnealingParamScheduler', param_name='weight_decay',
         eta_min_ratio=10., by_epoch=True, begin=0, end=max_epochs,
         convert_to_iter_based=True),
]
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=max_epochs)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=50),
    checkpoint=dict(type='IntactCheckpointHook', interval=10, max_keep_ckpts=3))
# DINOv2's teacher-temperature warm-up (0.04 -> 0.07 over 30 epochs) is
# available as
#   custom_hooks = [dict(type='TeacherTempHook', start=0.04, end=0.07,
#                        warmup_epochs=30)]
# Table 6 keeps it constant at 0.04.
auto_scale_lr = dict(base_batch_size=512, enable=False)
