# Decoder probing on COCO with a DETR-family head (QB-Heat Sec. 5, App.
# B.2, Tab. 5) and a frozen QB-Heat Mobile-Former-285M.
#
# Stand-in for MF-Dec: the paper's MF-Dec-211 / MF-Dec-522 heads
# (Mobile-Former blocks as DETR decoders over 1/32, 1/16, 1/8, Tab. 13) are
# not in mmdet. mmdet's Deformable DETR is the closest available head: like
# MF-Dec it decodes 100 queries of width 256 from the three scales 1/8,
# 1/16 and 1/32, the 1/32 level made by a stride-2 conv on the stride-16
# backbone output (MF-Dec's "down-conv"). Its multi-scale deformable
# attention has a pure-PyTorch path in mmcv, so it also runs on CPU.
#
# Paper recipe (App. B.2): only the decoder trains, 500 epochs, 8 GPUs x 2
# images, AdamW lr 1e-4, wd 1e-4, lr / 10 after 400 epochs, dropout 0.1
# (Deformable DETR's own). Kept from mmdet's Deformable DETR: its data
# pipeline (multi-scale resize + crop), gradient clipping 0.1, lr x 0.1 for
# the sampling offsets and reference points.
# Pretrained checkpoint (a QB-Heat pretraining checkpoint):
#   --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    'mmdet::deformable_detr/deformable-detr_r50_16xb2-50e_coco.py',
    './_base_/mobileformer-285m-frozen.py',
]

num_levels = 3
model = dict(
    num_queries=100,
    num_feature_levels=num_levels,
    backbone=dict(_delete_=True, **_base_.frozen_mobileformer),
    neck=dict(in_channels=[48, 720],
              num_outs=num_levels),
    encoder=dict(layer_cfg=dict(self_attn_cfg=dict(num_levels=num_levels))),
    decoder=dict(layer_cfg=dict(cross_attn_cfg=dict(num_levels=num_levels))))

max_epochs, drop_epoch = 500, 400
optim_wrapper = dict(optimizer=dict(lr=1e-4))
param_scheduler = [
    dict(type='MultiStepLR', begin=0, end=max_epochs, by_epoch=True,
         milestones=[drop_epoch], gamma=0.1)
]
train_cfg = dict(max_epochs=max_epochs, val_interval=10)
default_hooks = dict(
    checkpoint=dict(type='mmpretrain.IntactCheckpointHook', interval=10, max_keep_ckpts=3))
auto_scale_lr = dict(base_batch_size=16)
