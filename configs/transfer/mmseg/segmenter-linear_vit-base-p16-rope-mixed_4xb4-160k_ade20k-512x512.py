# Segmenter linear decoder 160k, ViT-B/16 with RoPE-Mixed (no APE), last
# block -> 1x1 conv, ADE20K 512x512 at batch 16 (4 GPUs x 4): ICPF B.3
# (AdamW lr 8e-5, wd 1e-2, poly to 0.1 x lr; lr/wd are swept there).
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../../_base_/models/segmenter-linear_vit-base-p16.py',
    '../../_base_/datasets/ade20k_512x512.py',
    '../../_base_/schedules/mmseg_adamw-layer-decay_160k.py',
    'mmseg::_base_/default_runtime.py'
]

# (padded to 512, 512 sliding windows at test: the model base)
# Segmenter linear decoder on ADE20K (ICPF B.3, after LOCA): 160k iterations
# at batch 16, AdamW, poly decay to min_lr = 0.1 x lr. ICPF sweeps lr in
# {8e-5, 3e-5, 1e-5, 8e-6} and weight decay in {1e-2, 1e-4}; the default is
# the first of each (`--cfg-options optim_wrapper.optimizer.lr=...`). No
# layer-wise decay (none is mentioned).
lr = 8e-5
optim_wrapper = dict(
    optimizer=dict(lr=lr, weight_decay=1e-2),
    paramwise_cfg=dict(layer_decay_rate=1.0))
param_scheduler = [
    dict(type='PolyLR', power=0.9, eta_min=0.1 * lr, by_epoch=False,
         begin=0, end=160000)
]
