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
        arch=_base_.mini_vit_arch,
        img_size=_base_.img_size,
        patch_size=_base_.patch_size,
        rope=dict(type='mixed'),
        use_ape=False,
        drop_path_rate=0.,
        out_type='raw'))

# The demo's schedule (calibrated, see README "Quick start"): 3000
# iterations of batch 32 (about 47 passes over the 2048 unlabeled views).
# With the 300 of the base, the features were no better than random ones for
# the material tasks (linear probe on 8x8-pixel cells of mini-stuff: 47.0% vs
# 45.9% from random weights; 53.6% after 3000).
max_iters, warmup_iters = 3000, 50
warmup, cosine = _base_.param_scheduler  # the base's, stretched
param_scheduler = [
    dict(warmup, end=warmup_iters),
    dict(cosine, begin=warmup_iters, end=max_iters),
]
train_cfg = dict(max_iters=max_iters)
default_hooks = dict(
    logger=dict(interval=50),
    checkpoint=dict(interval=max_iters, max_keep_ckpts=1),
    online_probe=dict(interval=500),
    health_monitor=dict(interval=500))
