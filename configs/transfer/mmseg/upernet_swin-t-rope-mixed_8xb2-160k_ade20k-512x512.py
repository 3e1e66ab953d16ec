# UperNet 160k on RoPE-Swin-T (../../_base_/models/rope-swin-t.py): mmseg's
# Swin-T UperNet recipe (ADE20K 512x512, batch 16 = 8 GPUs x 2, AdamW lr
# 6e-5, wd 0.01, poly, drop path 0.3) with mmpos' backbone.
# Position schemes: model.backbone.rope x model.backbone.use_rpb.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    'mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py',  # noqa: E501
    '../../_base_/models/rope-swin-t.py'
]

checkpoint_file = None  # the base's download; ours is init_cfg.checkpoint
custom_imports = dict(imports=['mmpos'], allow_failed_imports=False)
model = dict(backbone=_base_.rope_swin_t)
auto_scale_lr = dict(enable=False, base_batch_size=16)
# mmpos' hook: deletes old checkpoints only after the new one is complete
default_hooks = dict(checkpoint=dict(type='mmpretrain.IntactCheckpointHook'))
