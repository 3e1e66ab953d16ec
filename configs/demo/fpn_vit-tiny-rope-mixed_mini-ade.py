# Demo / test config: a tiny RoPE-Mixed ViT + Semantic FPN (blocks 1-4 ->
# MultiLevelNeck -> FPN -> FPNHead, the CR2PQ layout) trained from scratch
# on mini-ADE for a few hundred iterations on CPU, scored by IoUMetric.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../_base_/models/fpn_vit-base-p16_mln.py',
    '../_base_/datasets/mini_ade.py',
    '../_base_/schedules/mmseg_mini_300it.py',
    '../_base_/models/rope-vit_mini-arch.py',
]
embed_dims = _base_.mini_vit_arch['embed_dims']
width = 64
norm_cfg = dict(type='BN', requires_grad=True)
model = dict(
    data_preprocessor=dict(size=_base_.crop_size),
    backbone=_base_.mini_mln_backbone,
    neck=[
        dict(type='mmpretrain.MultiLevelNeck', in_channels=embed_dims,
             scale_factors=_base_.mini_mln_scales, norm_cfg=norm_cfg),
        dict(type='FPN', in_channels=[embed_dims] * 4, out_channels=width,
             num_outs=4)
    ],
    decode_head=dict(
        in_channels=[width] * 4, channels=width, norm_cfg=norm_cfg),
    test_cfg=dict(mode='whole'))
