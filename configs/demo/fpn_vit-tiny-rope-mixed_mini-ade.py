# Demo / test config: a tiny RoPE-Mixed ViT + Semantic FPN (blocks 1-4 ->
# DeconvMultiLevelNeck -> FPN -> FPNHead, the CR2PQ layout) trained from
# scratch on mini-ADE for a few hundred iterations on CPU, scored by IoUMetric.
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    './_base_/fpn_vit-tiny-rope-mixed.py',
    '../_base_/datasets/mini_ade.py',
    '../_base_/schedules/mmseg_mini_300it.py',
]
model = dict(
    data_preprocessor=dict(size=(128, 128)),
    decode_head=dict(num_classes=6))
