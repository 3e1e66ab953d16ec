# CR2PQ ViT-S/16, 100 epochs, with the frozen DINO ResNet-50 teacher
# (Table 4's best row; the paper's Tables 1-3 numbers): the EMA-teacher
# config cr2pq_vit-small-p16_32xb64-100e_in1k.py with
# _base_/dino-r50_teacher.py.
# Teacher weights: --cfg-options model.teacher_checkpoint=PATH
_base_ = [
    './cr2pq_vit-small-p16_32xb64-100e_in1k.py',
    './_base_/dino-r50_teacher.py',
]

model = _base_.dino_r50_teacher
