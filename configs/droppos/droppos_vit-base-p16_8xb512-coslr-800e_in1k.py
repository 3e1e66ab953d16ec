# DropPos ViT-B/16, 800 epochs (Tables 5-6): the 200-epoch recipe, longer
# (sigma still decays 1 -> 0 over the whole run).
_base_ = ['./droppos_vit-base-p16_8xb512-coslr-200e_in1k.py']

max_epochs = 800
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-4, by_epoch=True, begin=0,
         end=10, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', T_max=max_epochs - 10, by_epoch=True,
         begin=10, end=max_epochs, convert_to_iter_based=True)
]
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=max_epochs)
