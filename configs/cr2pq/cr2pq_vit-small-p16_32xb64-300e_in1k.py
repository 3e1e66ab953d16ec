# CR2PQ ViT-S/16 on ImageNet-1K, 300 epochs, EMA teacher (Table 4's "EMA
# update" row, 44.1 / 39.8): as ViT-B but blr 1.75e-4 (lr = blr * 2048 /
# 256).
#
# Table 6 rows: pos_ablation/ (discrete RoPE, continuous sin-cos, learnable,
# discrete sin-cos) start from this config.
# Table 4 teachers: the frozen DINO ResNet-50 of Tables 1-3 is
#   cr2pq_vit-small-p16_dino-r50-teacher_32xb64-300e_in1k.py; pixels:
#   model.target='pixel', neck.out_channels=768, loss.norm='layernorm'.
_base_ = [
    '../_base_/default_runtime_pretrain.py',
    '_base_/imagenet_byol-views_boxes.py',
    '_base_/cr2pq_vit-small-p16.py',
    '_base_/cr2pq_32xb64-300e_in1k.py',
]

blr = 1.75e-4
optim_wrapper = dict(optimizer=dict(lr=blr * 2048 / 256))
