# DropPos ViT-L/16, 200 epochs (Table 5's ViT-L row) with DDP: the ViT-B
# 200-epoch recipe with a ViT-L encoder (1024 wide, 24 blocks, 16 heads),
# the position decoder reading 1024 channels and the 40 warm-up epochs of
# the paper's ViT-L pretraining (A.1). The FSDP variant of this run is
# droppos_vit-large-p16_fsdp-8xb512-coslr-200e_in1k.py.
_base_ = ['./droppos_vit-base-p16_8xb512-coslr-200e_in1k.py']

model = dict(backbone=dict(arch='l'), head=dict(in_channels=1024))
warmup_epochs = 40
param_scheduler = [
    dict(_base_.param_scheduler[0], end=warmup_epochs),
    dict(_base_.param_scheduler[1], T_max=200 - warmup_epochs,
         begin=warmup_epochs)
]
