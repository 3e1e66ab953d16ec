# Demo pretraining: DropPos (configs/droppos/droppos_vit-tiny_mini.py) with
# the demo detectors' own backbone, the 4-block RoPE-Mixed mini ViT without
# APE (patch 8), so `backbone.*` of its checkpoint is exactly the backbone of
# configs/demo/{mask-rcnn,upernet}_*: a dropped position is an unrotated
# token carrying DropPos' [MASK] position token (see droppos.py).
_base_ = ['../droppos/droppos_vit-tiny_mini.py']

model = dict(
    backbone=dict(
        _delete_=True,
        type='RoPEVisionTransformer',
        arch=_base_.mini_vit_arch,
        img_size=_base_.img_size,
        patch_size=_base_.patch_size,
        rope_type='mixed',
        use_ape=False,
        drop_path_rate=0.,
        out_type='raw'))
