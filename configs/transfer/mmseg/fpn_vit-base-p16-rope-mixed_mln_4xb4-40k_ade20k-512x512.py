# Semantic FPN 40k, ViT-B/16 with RoPE-Mixed (no APE), blocks 4/6/8/12 ->
# DeconvMultiLevelNeck -> FPN, ADE20K 512x512 at batch 16 (4 GPUs x 4): CR2PQ
# Table 2 (AdamW lr 1e-4, wd 1e-4, poly 0.9).
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../../_base_/models/fpn_vit-base-p16_mln.py',
    '../../_base_/datasets/ade20k_512x512.py',
    '../../_base_/schedules/mmseg_adamw-layer-decay_160k.py',
    'mmseg::_base_/default_runtime.py'
]

# (padded to 512, 512 sliding windows at test: the model base)
# Semantic FPN on ADE20K with a ViT (the XCiT / SelfPatch protocol CR2PQ
# Table 2 follows): 40k iterations, AdamW lr 1e-4 wd 1e-4, poly (power 0.9),
# no layer-wise decay.
optim_wrapper = dict(
    optimizer=dict(weight_decay=1e-4),
    paramwise_cfg=dict(layer_decay_rate=1.0))
train_cfg = dict(max_iters=40000, val_interval=4000)
default_hooks = dict(checkpoint=dict(interval=4000))
param_scheduler = [
    dict(type='PolyLR', power=0.9, eta_min=0.0, by_epoch=False, begin=0,
         end=40000)
]
