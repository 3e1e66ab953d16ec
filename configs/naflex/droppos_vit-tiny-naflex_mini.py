# DropPos on NaFlex batches (CPU mini run, #57): the NaFlex MAE mini's
# views, schedule and hooks (mae_vit-tiny-naflex_mini.py: the 4-block mini
# RoPE-Mixed ViT, each mini unlabeled image cropped at 1:3 to 3:1 and
# resized at that ratio to at most 32 patches of 8 px, padded with a key
# mask; docs/user_guides/naflex.md) with DropPos' model. Per image: 25 % of
# its patches removed (the DropPos mini's gamma), 75 % of the kept ones
# lose their position (gamma_pos), and each is classified among the
# positions of its own grid (NaFlexDropPosHead: a 2-block 128-wide decoder,
# outputs for a 12 x 12 canvas, more than the 10 patches a side that 32
# tokens at 1:3 give). sigma 1 -> 0, no attentive weights (tau = inf), as
# the DropPos mini. The MAE mini's `mask_token` key also keeps
# `pos_mask_token` out of weight decay.
_base_ = ['./mae_vit-tiny-naflex_mini.py']

model = dict(
    _delete_=True,
    type='NaFlexDropPos',
    backbone=_base_.model.backbone,
    head=dict(type='NaFlexDropPosHead', max_grid=(12, 12), in_channels=96,
              embed_dims=128, num_layers=2, num_heads=4, sigma=1.,
              tau=None),
    mask_ratio=0.25,
    pos_mask_ratio=0.75,
    data_preprocessor=_base_.model.data_preprocessor)
custom_hooks = [dict(type='DropPosSigmaHook', start=1.0, end=0.0)]
