# Swin-Mask2Former 160k (RoPE-ViT Table 4): mmseg's Mask2Former Swin-T recipe
# (ADE20K 512x512, batch 16 = 8 GPUs x 2, AdamW lr 1e-4, backbone x0.1, poly)
# on RoPE-Swin-T (../../_base_/models/rope-swin-t.py).
# Position schemes: model.backbone.rope x model.backbone.use_rpb.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    'mmseg::mask2former/mask2former_swin-t_8xb2-160k_ade20k-512x512.py',
    '../../_base_/models/rope-swin-t.py'
]

pretrained = None  # the base's download; ours is init_cfg.checkpoint
custom_imports = dict(
    imports=['mmdet.models', 'mmpos'], allow_failed_imports=False)
model = dict(backbone=_base_.rope_swin_t)
auto_scale_lr = dict(enable=False, base_batch_size=16)
# mmpos' hook: deletes old checkpoints only after the new one is complete
default_hooks = dict(checkpoint=dict(type='mmpretrain.IntactCheckpointHook'))
