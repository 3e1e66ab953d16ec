# Semantic FPN 40k, ViT-B/16 with RoPE-Mixed (no APE), blocks 4/6/8/12 ->
# MultiLevelNeck -> FPN, ADE20K 512x512 at batch 16 (4 GPUs x 4): CR2PQ
# Table 2 (AdamW lr 1e-4, wd 1e-4, poly 0.9).
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../../_base_/models/fpn_vit-b16_mln.py',
    '../../_base_/datasets/ade20k_512x512.py',
    '../../_base_/schedules/mmseg_adamw_40k.py',
    'mmseg::_base_/default_runtime.py'
]

model = _base_.ade20k_512_model
