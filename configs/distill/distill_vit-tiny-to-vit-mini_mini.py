# Distillation (DINOv3's recipe, mmpos/models/selfsup/distill) on the mini
# unlabeled images (CPU): the mini DINOv2 (its base, 4 blocks of width
# 96), frozen, teaches a student of width 48
# (4 blocks, 3 heads) with the same crops, heads' prototype counts, losses
# and schedule. The teacher is that config's checkpoint, its EMA teacher
# (docs/user_guides/distill.md):
#   python tools/train.py CONFIG --cfg-options \
#       model.teacher.checkpoint=work_dirs/dinov2_mini/iter_60.pth
_base_ = ['../dinov2/dinov2_vit-tiny_mini.py']

student_width = 48
teacher = {k: _base_.model[k] for k in ('backbone', 'head', 'patch_head')}
model = dict(
    type='Distill',
    teacher=dict(**teacher, checkpoint=None, prefix='teacher.module.'),
    backbone=dict(
        arch=dict(embed_dims=student_width, num_layers=4, num_heads=3,
                  feedforward_channels=4 * student_width)),
    head=dict(in_channels=student_width),
    patch_head=dict(in_channels=student_width))
