# DropPos ViT-B/16, 200 epochs on ImageNet-1K (Table A, Tables 1-6 default):
# AdamW, lr = 1.5e-4 x 4096 / 256, betas (0.9, 0.95), wd 0.05, cosine
# decay after 10 warm-up epochs, batch 4096 (8 GPUs x 512, or scale with
# auto_scale_lr), RandomResizedCrop (MAE's pipeline, 0.2-1 crop + flip).
_base_ = [
    './_base_/droppos_vit-base-p16.py',
    'mmpretrain::_base_/datasets/imagenet_bs512_mae.py',
    '../_base_/default_runtime_pretrain.py',
]

custom_imports = dict(
    imports=[
        'mmpos', 'mmpos.models.selfsup.droppos',
        'mmpos.models.heads.droppos_head',
        'mmpos.engine.hooks.droppos_sigma_hook'
    ],
    allow_failed_imports=False)

max_epochs = 200
warmup_epochs = 10
optim_wrapper = dict(
    type='AmpOptimWrapper',
    loss_scale='dynamic',
    optimizer=dict(
        type='AdamW', lr=1.5e-4 * 4096 / 256, betas=(0.9, 0.95),
        weight_decay=0.05),
    # authors' code clips at 5.0; no decay on norms, biases and tokens
    clip_grad=dict(max_norm=5.0),
    paramwise_cfg=dict(
        custom_keys={
            'ln': dict(decay_mult=0.),
            'bias': dict(decay_mult=0.),
            'pos_embed': dict(decay_mult=0.),
            'mask_token': dict(decay_mult=0.),
            'cls_token': dict(decay_mult=0.)
        }))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-4, by_epoch=True, begin=0,
         end=warmup_epochs, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', T_max=max_epochs - warmup_epochs,
         by_epoch=True, begin=warmup_epochs, end=max_epochs,
         convert_to_iter_based=True)
]
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=max_epochs)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=100),
    checkpoint=dict(type='CheckpointHook', interval=1, max_keep_ckpts=3))
auto_scale_lr = dict(base_batch_size=4096)
resume = True
