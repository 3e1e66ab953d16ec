# UperNet 160k, ViT-B/16 with RoPE-Mixed (no APE), blocks 4/6/8/12 ->
# DeconvMultiLevelNeck, ADE20K 512x512 at batch 16 (4 GPUs x 4): CR2PQ Table 2,
# RoPE-ViT Table 3 (AdamW lr 1e-4, wd 0.05, layer decay 0.65, poly).
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../../_base_/models/upernet_vit-base-p16_mln.py',
    '../../_base_/datasets/ade20k_512x512.py',
    '../../_base_/schedules/mmseg_adamw-layer-decay_160k.py',
    'mmseg::_base_/default_runtime.py'
]

# (padded to 512, 512 sliding windows at test: the model base)
