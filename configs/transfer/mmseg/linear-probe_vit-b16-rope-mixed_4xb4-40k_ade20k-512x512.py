# DINOv2-style linear segmentation probe of a frozen ViT-B/16 (RoPE-Mixed, no
# APE) on ADE20K 512x512, batch 16 (4 GPUs x 4), 40k iterations; only the
# BN + 1x1 conv head trains. mIoU in <work_dir>/metrics.json with
# tools/test.py --out (read by tools/paper_tables/gen_tables.py).
# Pretrained checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../../_base_/models/linear-probe_vit-b16.py',
    '../../_base_/datasets/ade20k_512x512.py',
    '../../_base_/schedules/mmseg_adamw_linear-probe_40k.py',
    'mmseg::_base_/default_runtime.py'
]

model = _base_.ade20k_512_model
