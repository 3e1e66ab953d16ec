# Segmenter linear decoder 160k, ViT-B/16 with RoPE-Mixed (no APE), last
# block -> 1x1 conv, ADE20K 512x512 at batch 16 (4 GPUs x 4): ICPF B.3
# (AdamW lr 8e-5, wd 1e-2, poly to 0.1 x lr; lr/wd are swept there).
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../../_base_/models/segmenter-linear_vit-b16.py',
    '../../_base_/datasets/ade20k_512x512.py',
    '../../_base_/schedules/mmseg_adamw_linear-decoder_160k.py',
    'mmseg::_base_/default_runtime.py'
]

model = _base_.ade20k_512_model
