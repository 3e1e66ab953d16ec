# DropPos ViT-L/16, 800 epochs (Table 5's ViT-L row): the ViT-B recipe with
# a ViT-L encoder, the position decoder reading 1024 channels, 40 warm-up
# epochs (A.1) and cosine decay to epoch 800 (sigma decays 1 -> 0 over the
# whole run).
_base_ = ['./droppos_vit-base-p16_8xb512-coslr-200e_in1k.py']

model = dict(backbone=dict(arch='l'), head=dict(in_channels=1024))
max_epochs, warmup_epochs = 800, 40
param_scheduler = [
    dict(_base_.param_scheduler[0], end=warmup_epochs),
    dict(_base_.param_scheduler[1], T_max=max_epochs - warmup_epochs,
         begin=warmup_epochs, end=max_epochs)
]
train_cfg = dict(max_epochs=max_epochs)
