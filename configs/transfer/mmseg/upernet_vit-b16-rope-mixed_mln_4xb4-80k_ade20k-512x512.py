# UperNet 80k, ViT-B/16 with RoPE-Mixed (no APE), blocks 4/6/8/12 ->
# MultiLevelNeck, ADE20K 512x512 at batch 16 (4 GPUs x 4): DropPos A.3
# (AdamW lr 1e-4 for MAE-like encoders, searched up to 7e-4; layer decay).
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../../_base_/models/upernet_vit-b16_mln.py',
    '../../_base_/datasets/ade20k_512x512.py',
    '../../_base_/schedules/mmseg_adamw-layer-decay_80k.py',
    'mmseg::_base_/default_runtime.py'
]

model = _base_.ade20k_512_model
