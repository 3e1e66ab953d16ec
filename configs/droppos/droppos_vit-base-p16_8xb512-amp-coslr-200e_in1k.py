# DropPos ViT-B/16, 200 epochs on ImageNet-1K (Table A, Tables 1-6 default):
# AdamW, lr = 1.5e-4 x 4096 / 256, betas (0.9, 0.95), wd 0.05, cosine
# decay after 10 warm-up epochs, batch 4096 (8 GPUs x 512, or scale with
# auto_scale_lr), RandomResizedCrop (MAE's pipeline, 0.2-1 crop + flip).
_base_ = [
    './_base_/droppos_vit-base-p16.py',
    'mmpretrain::_base_/datasets/imagenet_bs512_mae.py',
    '../_base_/schedules/pretrain_amp_coslr_200e.py',
]

optim_wrapper = dict(
    optimizer=dict(lr=1.5e-4 * 4096 / 256, weight_decay=0.05),
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
auto_scale_lr = dict(base_batch_size=4096)
