# The demo Cascade Mask R-CNN (DeconvMultiLevelNeck + FPN) with the backbone of
# the CR2PQ mini run (../cr2pq_vit-tiny_mini.py): the same 4-block ViT with 8
# px patches, with the student's RoPE-Axial of base 100 (Eq. 5) instead of
# RoPE-Mixed. Checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
# (a pretraining checkpoint or the output of
# tools/model_converters/mmpos2backbone.py).
_base_ = ['../../demo/cascade-mask-rcnn_vit-tiny-rope-mixed_mini-coco.py']

model = dict(backbone=dict(rope=dict(type='axial', theta=100.)))
