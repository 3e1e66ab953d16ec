# UperNet 80k, ViT-B/16 with RoPE-Mixed (no APE), blocks 4/6/8/12 ->
# DeconvMultiLevelNeck, ADE20K 512x512 at batch 16 (4 GPUs x 4): DropPos A.3
# (AdamW lr 1e-4 for MAE-like encoders, searched up to 7e-4; layer decay).
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../../_base_/models/upernet_vit-base-p16_mln.py',
    '../../_base_/datasets/ade20k_512x512.py',
    '../../_base_/schedules/mmseg_adamw-layer-decay_160k.py',
    'mmseg::_base_/default_runtime.py'
]

# (padded to 512, 512 sliding windows at test: the model base)
# The 160k recipe shortened to 80k iterations (DropPos A.3: UperNet 80k,
# ViT-B lr 1e-4 for MAE-like encoders, searched up to 7e-4).
train_cfg = dict(max_iters=80000, val_interval=8000)
default_hooks = dict(checkpoint=dict(interval=8000))
# the poly decay ends at 80k
param_scheduler = _base_.param_scheduler
param_scheduler[1].end = 80000
