# The mini distillation study's student pretrained alone
# (mmpos_harness/distill_study.py): the method ranking's DINOv2 recipe
# (configs/method_ranking/dinov2_vit-tiny-rope-mixed_mini.py) on the
# distilled student's backbone (4 blocks of width 48, 3 heads, RoPE-Mixed
# and the APE; configs/distill/distill_vit-tiny-to-vit-mini-rope-mixed_mini.py)
# and heads of its width; its EMA teacher is that student's copy.
_base_ = ['../method_ranking/dinov2_vit-tiny-rope-mixed_mini.py']

student_width = 48
model = dict(
    backbone=dict(
        arch=dict(embed_dims=student_width, num_layers=4, num_heads=3,
                  feedforward_channels=4 * student_width)),
    head=dict(in_channels=student_width),
    patch_head=dict(in_channels=student_width))
