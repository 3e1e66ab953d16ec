# Demo / test config: a tiny RoPE-Mixed ViT + Cascade Mask R-CNN (blocks
# 1-4 -> DeconvMultiLevelNeck -> FPN, the CR2PQ layout) trained from scratch on
# mini-COCO for a few hundred iterations on CPU, scored by CocoMetric.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../_base_/models/cascade-mask-rcnn_vit-base-p16_mln-fpn.py',
    '../_base_/datasets/mini_coco_instance.py',
    '../_base_/schedules/mmdet_mini_300it.py',
]
embed_dims = 96
width, num_classes = 64, 3
model = dict(
    backbone=dict(
        arch=dict(
            _delete_=True, embed_dims=96, num_layers=4, num_heads=3,
            feedforward_channels=384),
        patch_size=8,
        drop_path_rate=0.,
        out_indices=(0, 1, 2, 3)),
    neck=[
        dict(type='mmpretrain.DeconvMultiLevelNeck', in_channels=embed_dims,
             scale_factors=(2.0, 1.0, 0.5, 0.25)),
        dict(type='FPN', in_channels=[embed_dims] * 4, out_channels=width,
             num_outs=5)
    ],
    rpn_head=dict(in_channels=width, feat_channels=width),
    roi_head=dict(
        bbox_roi_extractor=dict(out_channels=width),
        bbox_head=[
            dict(head, in_channels=width, fc_out_channels=256,
                 num_classes=num_classes)
            for head in _base_.model.roi_head.bbox_head
        ],
        mask_roi_extractor=dict(out_channels=width),
        mask_head=dict(in_channels=width, conv_out_channels=width,
                       num_classes=num_classes)),
    train_cfg=dict(rcnn=[
        dict(stage, sampler=dict(stage.sampler, num=128))
        for stage in _base_.model.train_cfg.rcnn
    ]))
