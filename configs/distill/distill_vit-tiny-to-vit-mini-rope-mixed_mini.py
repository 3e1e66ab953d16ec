# The mini distillation study (mmpos_harness/distill_study.py,
# designs/distill_mini.yaml): distill_vit-tiny-to-vit-mini_mini.py with
# RoPE-Mixed added to the teacher and the student, so that the teacher is
# the CPU method ranking's DINOv2 (configs/method_ranking/
# dinov2_vit-tiny-rope-mixed_mini.py: 4 blocks of width 96, RoPE-Mixed and
# the APE) and both are evaluated by the ranking's frozen probes. The
# student: 4 blocks of width 48, 3 heads, RoPE-Mixed and the APE.
_base_ = ['./distill_vit-tiny-to-vit-mini_mini.py']
# _delete_: the base backbones have no RoPE (rope=None)
model = dict(
    teacher=dict(backbone=dict(rope=dict(_delete_=True, type='mixed'))),
    backbone=dict(rope=dict(_delete_=True, type='mixed')))
