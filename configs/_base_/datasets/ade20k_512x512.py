# ADE20K at 512x512 as in every paper's protocol: mmseg's pipeline (random
# rescale of 2048x512 by 0.5-2.0, 512 crop, flip, photometric distortion),
# batch 4 per GPU. Models pad the batch to 512 and evaluate with 512 sliding
# windows (stride 341).
_base_ = ['mmseg::_base_/datasets/ade20k.py']

crop_size = (512, 512)
