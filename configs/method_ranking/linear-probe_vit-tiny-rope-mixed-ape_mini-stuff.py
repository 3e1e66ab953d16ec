# CPU method ranking: the linear-probe backbone with the APE of the methods
# that pretrain with one (DINOv2, ICPF; mmpos_harness/comparison/runs.py
# APE_PROBE_CONFIG). The table is stored for the 64 px pretraining grid
# (8 x 8 patches) and resized to other grids in the forward pass; every
# frozen probe of those methods builds this backbone and their checkpoints
# are extracted against it.
_base_ = ['./linear-probe_vit-tiny-rope-mixed_mini-stuff.py']
model = dict(backbone=dict(use_ape=True, img_size=64))
