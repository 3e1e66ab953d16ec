# CR2PQ ViT-B/16 on ImageNet-1K, 300 epochs (Tables 3-5): batch 2048
# (32 GPUs x 64), AdamW with blr 1.5e-4, 40 warm-up epochs, then cosine.
_base_ = [
    '../_base_/default_runtime_pretrain.py',
    '_base_/imagenet_byol-views_boxes.py',
    '_base_/cr2pq_vit-base-p16.py',
    '_base_/cr2pq_32xb64-300e_in1k.py',
]
