# DINOv2's "lin. 4" depth probe on NYU-Depth v2: depth_nyu.py with the
# patch and class tokens of 4 evenly spaced blocks (ViT-S/B: 3, 6, 9, 12).
_base_ = ['./depth_nyu.py']

depth_probe = dict(blocks=4)
