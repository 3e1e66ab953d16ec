# Linear probing on ImageNet-1K (MAE protocol, mmpretrain's MAE recipe): the
# frozen ViT-B/16 (RoPE-Mixed, no APE) class token -> BatchNorm without
# affine parameters (ClsBatchNormNeck) -> linear head; LARS lr 6.4 at batch
# 16384 (8 GPUs x 2048), 90 epochs, random resized crop + flip.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    'mmpretrain::mae/benchmarks/vit-base-p16_8xb2048-linear-coslr-90e_in1k.py',
    '../../_base_/models/rope-vit-base-p16_dense.py'
]

model = dict(
    backbone={
        **_base_.vit_backbone, '_delete_': True,
        'img_size': 224,
        'drop_path_rate': 0.,
        'frozen_stages': 12,
        'out_type': 'cls_token',
        'final_norm': True
    })
# LARS lr 6.4 = 0.1 x 16384 / 256 is set for the total batch of 16384.
auto_scale_lr = dict(base_batch_size=16384)
# mmpos' hook: deletes old checkpoints only after the new one is complete
default_hooks = dict(checkpoint=dict(type='mmpretrain.IntactCheckpointHook'))
