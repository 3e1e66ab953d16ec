# CR2PQ ViT-B/16, 100 epochs (40 warm-up epochs as at 300).
_base_ = [
    '../_base_/default_runtime_pretrain.py',
    '_base_/imagenet_byol-views_boxes.py',
    '_base_/cr2pq_vit-base-p16.py',
    '_base_/cr2pq_32xb64-100e_in1k.py',
]
