# Demo pretraining: DropPos (configs/droppos/droppos_vit-tiny_mini.py) with
# the demo detectors' own backbone, the 4-block RoPE-Mixed mini ViT without
# APE (patch 8), so `backbone.*` of its checkpoint is exactly the backbone of
# configs/demo/{mask-rcnn,upernet}_*: a dropped position is an unrotated
# token carrying DropPos' [MASK] position token (see droppos.py).
_base_ = ['../droppos/droppos_vit-tiny_mini.py']

model = dict(
    backbone=dict(
        _delete_=True,
        type='RoPEVisionTransformer',
        arch=dict(
            embed_dims=96, num_layers=4, num_heads=3,
            feedforward_channels=384),
        img_size=32,
        patch_size=8,
        rope=dict(type='mixed'),
        use_ape=False,
        drop_path_rate=0.,
        out_type='raw'))

# The demo's schedule: 3000 iterations of batch 32 (about 47 passes over the
# 2048 unlabeled views; the calibration: docs/notes/demo_calibration.md).
max_iters, warmup_iters = 3000, 50
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0,
         end=warmup_iters),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=False,
         begin=warmup_iters, end=max_iters),
]
train_cfg = dict(max_iters=max_iters)
default_hooks = dict(
    logger=dict(interval=50),
    checkpoint=dict(interval=max_iters, max_keep_ckpts=1),
    online_probe=dict(interval=500),
    health_monitor=dict(interval=500))
