# CR2PQ ViT-S/16 on ImageNet-1K, 300 epochs (Tables 1, 2, 6): as ViT-B but
# blr 1.75e-4 (lr = blr * 2048 / 256).
#
# Table 6 rows: pos_ablation/ (discrete RoPE, continuous sin-cos, learnable,
# discrete sin-cos); this config is the continuous 2-D RoPE row.
# Table 4 teachers: model.target='pixel' (neck.out_channels=768,
#   loss.norm='layernorm'), or a frozen network, e.g. ResNet-50 (7x7 grid):
#   target=dict(type='ResNet', depth=50, out_indices=(3, ),
#               init_cfg=dict(type='Pretrained', checkpoint=CKPT)),
#   neck.out_channels=2048, loss.norm='layernorm'.
_base_ = [
    '_base_/cr2pq_vit-small-p16.py',
    '_base_/cr2pq_32xb64-300e_in1k.py',
]

blr = 1.75e-4
optim_wrapper = dict(optimizer=dict(lr=blr * _base_.batch_size / 256))
