# ICPF B.2: ViTDet's Mask R-CNN (LayerNorm RoI heads, 2-conv RPN) on a
# ViT-B/16 with RoPE-Mixed (no APE) and GLOBAL attention in every block (as
# ICPF states), last block -> simple feature pyramid, 1024x1024 large-scale
# jitter, 12 epochs at batch 64 (8 GPUs x 8), AdamW lr 3e-4, wd 0.1, layer
# decay 0.7. AMP: --amp. Windowed ViTDet: vitdet_mask-rcnn_*.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../../_base_/models/mask-rcnn_vit-base-p16_simple-fpn.py',
    '../../_base_/datasets/coco_instance_lsj-1024.py',
    '../../_base_/schedules/mmdet_adamw-layer-decay_1x.py',
    'mmdet::_base_/default_runtime.py'
]

# ViTDet's backbone and input (ICPF B.2 departs from it only in global
# attention and no relative position bias): no class token, no LayerNorm
# after the last block, images padded to 1024x1024 after normalisation with
# 0 (detectron2's square_pad; the LSJ pipeline has no Pad step).
model = dict(
    data_preprocessor=dict(pad_size_divisor=1024),
    backbone=dict(
        img_size=1024,  # the APE of the 64 x 64 grid, resized once at load
        pretrain_img_size=224,
        with_cls_token=False,
        final_norm=False))
train_dataloader = dict(batch_size=8)
default_hooks = dict(
    checkpoint=dict(type='mmpretrain.IntactCheckpointHook', by_epoch=False,
                    interval=2000, max_keep_ckpts=2))
log_processor = dict(by_epoch=False)
# ViTDet's 12-epoch schedule (ICPF B.2): 22,128 iterations at batch 64, 250
# warm-up iterations, lr x0.1 at iterations 19,667 and 21,306.
max_iters = 22128
train_cfg = dict(
    _delete_=True,
    type='IterBasedTrainLoop',
    max_iters=max_iters,
    val_interval=max_iters)
# Weight decay as ViTDet's optimizer (detectron2's get_default_optimizer_params
# with weight_decay_norm=0 and a pos_embed override): none on the backbone's
# LayerNorms and the APE; biases, relative position tables and the
# pyramid / RoI-head LayerNorms (detectron2's channel LayerNorm is not an
# nn.LayerNorm) are decayed. No decay on RoPE-Mixed's frequencies.
# ViTDet trains with AMP: tools/train.py --amp.
optim_wrapper = dict(
    optimizer=dict(lr=3e-4, weight_decay=0.1),
    paramwise_cfg=dict(
        _delete_=True,
        norm_decay_mult=0.,
        custom_keys={
            '.pos_embed': dict(decay_mult=0.),
            '.freqs': dict(decay_mult=0.),
            'neck.': dict(decay_mult=1.),
            'roi_head.': dict(decay_mult=1.),
        },
        layer_decay_rate=0.7))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0,
         end=250),
    dict(type='MultiStepLR', by_epoch=False, begin=0, end=max_iters,
         milestones=[19667, 21306], gamma=0.1)
]
# The lr is set for the total batch of 64 (8 GPUs x 8); --auto-scale-lr
# rescales it for another one.
auto_scale_lr = dict(enable=False, base_batch_size=64)
