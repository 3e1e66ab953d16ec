# The 300-iteration mini pretraining schedule of the masked-image methods
# (DropPos' mini config, MAE in the method ranking): ./pretrain_mini.py with
# AdamW lr 1e-3 and MAE's betas (0.9, 0.95), 20 warm-up iterations then
# cosine to 1e-5, logging every 10 iterations and one checkpoint at the end.
# Their configs take batches of 32 from an InfiniteSampler.
_base_ = ['./pretrain_mini.py']

max_iters, warmup_iters = 300, 20
optim_wrapper = dict(optimizer=dict(lr=1e-3, betas=(0.9, 0.95)))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0,
         end=warmup_iters),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=False,
         begin=warmup_iters, end=max_iters),
]
train_cfg = dict(max_iters=max_iters)
default_hooks = dict(
    logger=dict(interval=10),
    checkpoint=dict(interval=max_iters, max_keep_ckpts=2))
