# End-to-end fine-tuning on ImageNet-1K (mmpretrain's MAE recipe, as in
# DropPos A.1): ViT-B/16 (RoPE-Mixed, no APE), global average pooling, 100
# epochs at batch 1024 (8 GPUs x 128), AdamW lr 2e-3, layer decay 0.65,
# drop path 0.1, RandAugment (9, 0.5), random erasing 0.25, mixup 0.8,
# cutmix 1.0, label smoothing 0.1. DropPos uses layer decay 0.8:
# --cfg-options optim_wrapper.paramwise_cfg.layer_decay_rate=0.8
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    'mmpretrain::mae/benchmarks/vit-base-p16_8xb128-coslr-100e_in1k.py',
    '../../_base_/models/rope-vit-base-p16_dense.py'
]

model = dict(
    backbone={
        **_base_.vit_backbone, '_delete_': True,
        'img_size': 224,
        'out_type': 'avg_featmap',
        'final_norm': False
    })
# RoPE-Mixed frequencies get no weight decay, like the position embedding.
optim_wrapper = dict(
    paramwise_cfg=dict(custom_keys={'.freqs': dict(decay_mult=0.)}))
# mmpos' hook: deletes old checkpoints only after the new one is complete
default_hooks = dict(checkpoint=dict(type='mmpretrain.IntactCheckpointHook'))
