# CR2PQ pretraining recipe on ImageNet-1K, 300 epochs: batch 2048
# (32 GPUs x 64), AdamW, lr = blr * 2048 / 256 (blr 1.5e-4 for ViT-B), 40
# warm-up epochs, then cosine.
# No base: the configs list the runtime and the ImageNet views beside it.

batch_size, blr = 2048, 1.5e-4
max_epochs, warmup_epochs = 300, 40
# AdamW as CAE (betas 0.9/0.999, wd 0.05); no decay on norms, biases and
# the mask / class tokens.
optim_wrapper = dict(
    type='AmpOptimWrapper',
    loss_scale='dynamic',
    optimizer=dict(
        type='AdamW', lr=blr * batch_size / 256, betas=(0.9, 0.999),
        weight_decay=0.05),
    paramwise_cfg=dict(
        norm_decay_mult=0., bias_decay_mult=0.,
        custom_keys={
            'mask_token': dict(decay_mult=0.),
            'cls_token': dict(decay_mult=0.)
        }))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-4, by_epoch=True, begin=0,
         end=warmup_epochs, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', T_max=max_epochs - warmup_epochs,
         eta_min=1e-6, by_epoch=True, begin=warmup_epochs, end=max_epochs,
         convert_to_iter_based=True),
]
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=max_epochs)
auto_scale_lr = dict(base_batch_size=batch_size)
