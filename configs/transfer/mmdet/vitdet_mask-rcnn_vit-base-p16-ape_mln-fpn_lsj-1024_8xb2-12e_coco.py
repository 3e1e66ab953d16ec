# DropPos A.2 (after MAE/HPM's ViTDet benchmark): Mask R-CNN with an APE
# ViT-B/16 whose 12 blocks form 4 subsets of 2 window-attention blocks and 1
# closing global block (3/6/9/12); the 4 subset outputs -> DeconvMultiLevelNeck
# (strides 4/8/16/32) -> FPN; ViTDet's LayerNorm RoI heads and 2-conv RPN.
# LSJ 1024, 88,750 iterations at batch 16 (8 GPUs x 2; 12 epochs), AdamW lr
# 3e-4, x0.1 at 78,889 and 85,463 (ViTDet's schedule, as A.2 states).
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = './mask-rcnn_vit-base-p16-rope-mixed_simple-fpn_lsj-1024_8xb8-12e_coco.py'

model = dict(
    backbone=dict(
        _base_.vitdet_window,
        rope=None,
        use_ape=True,
        out_indices=(2, 5, 8, 11),
        final_norm=False),
    neck=_base_.mln_fpn_neck)
train_dataloader = dict(batch_size=2)
max_iters = 88750
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0,
         end=250),
    dict(type='MultiStepLR', by_epoch=False, begin=0, end=max_iters,
         milestones=[78889, 85463], gamma=0.1)
]
auto_scale_lr = dict(base_batch_size=16)
