# DropPos ViT-B/16, 200 epochs on ImageNet-1K (Table A, Tables 1-6 default),
# as the authors' scripts/pretrain_base.sh ran it: AdamW, lr = 1.5e-4 x
# 4096 / 256, betas (0.9, 0.95), wd 0.05, cosine decay after 10 warm-up
# epochs, batch 4096 (8 GPUs x 512, or scale with auto_scale_lr),
# RandomResizedCrop (MAE's pipeline, 0.2-1 crop + flip). Like the authors'
# main_pretrain.py: fp32 (their --use_fp16 defaults to off), each parameter
# tensor's gradient clipped to norm 5 on its own (--clip_grad 5), and weight
# decay on every tensor except 1-D ones and biases (timm's add_weight_decay:
# the class token and the [MASK] position token are decayed; the sin-cos
# pos_embed is frozen).
_base_ = [
    './_base_/droppos_vit-base-p16.py',
    'mmpretrain::_base_/datasets/imagenet_bs512_mae.py',
    '../_base_/schedules/pretrain_amp_coslr_200e.py',
]

optim_wrapper = dict(
    _delete_=True,
    type='PerTensorClipOptimWrapper',
    optimizer=dict(
        type='AdamW', lr=1.5e-4 * 4096 / 256, betas=(0.9, 0.95),
        weight_decay=0.05),
    clip_grad=dict(max_norm=5.0),
    paramwise_cfg=dict(bias_decay_mult=0., flat_decay_mult=0.))
auto_scale_lr = dict(base_batch_size=4096)
