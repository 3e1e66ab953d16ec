# DINOv2-style linear segmentation probe of a frozen ViT-B/16 (RoPE-Mixed, no
# APE) on ADE20K 512x512, batch 16 (4 GPUs x 4), 40k iterations; only the
# BN + 1x1 conv head trains. mIoU in <work_dir>/metrics.json with
# tools/test.py --out (read by tools/paper_tables/gen_tables.py).
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../../_base_/models/linear-probe_vit-base-p16.py',
    '../../_base_/datasets/ade20k_512x512.py',
    '../../_base_/schedules/mmseg_adamw-layer-decay_160k.py',
    'mmseg::_base_/default_runtime.py'
]

# (padded to 512, 512 sliding windows at test: the model base)
# Linear probe schedule: 40k iterations (DINOv2 §7.3), AdamW lr 1e-3, wd
# 1e-4, 1.5k linear warm-up then poly to 0, no layer-wise decay (only the
# head has gradients). The lr / wd are our choice (not checked against the
# authors' configs); sweep with --cfg-options optim_wrapper.optimizer.lr=...
max_iters = 40000
optim_wrapper = dict(
    optimizer=dict(lr=1e-3, weight_decay=1e-4),
    paramwise_cfg=dict(layer_decay_rate=1.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0,
         end=1500),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=1500,
         end=max_iters)
]
train_cfg = dict(max_iters=max_iters, val_interval=4000)
default_hooks = dict(checkpoint=dict(interval=4000))
