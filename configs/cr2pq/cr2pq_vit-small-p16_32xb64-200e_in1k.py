# CR2PQ ViT-S/16, 200 epochs (40 warm-up epochs as at 300), blr 1.75e-4.
_base_ = [
    '../_base_/default_runtime_pretrain.py',
    '_base_/imagenet_byol-views_boxes.py',
    '_base_/cr2pq_vit-small-p16.py',
    '_base_/cr2pq_32xb64-200e_in1k.py',
]

blr = 1.75e-4
optim_wrapper = dict(optimizer=dict(lr=blr * 2048 / 256))
