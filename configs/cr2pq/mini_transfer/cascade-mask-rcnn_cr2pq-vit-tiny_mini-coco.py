# The demo Cascade Mask R-CNN (DeconvMultiLevelNeck + FPN) with the backbone of the
# CR2PQ mini run (see ../_base_/mini_transfer.py).
_base_ = [
    '../../demo/cascade-mask-rcnn_vit-tiny-rope-mixed_mini-coco.py',
    '../_base_/mini_transfer.py',
]
model = dict(backbone=_base_.cr2pq_student_rope)
