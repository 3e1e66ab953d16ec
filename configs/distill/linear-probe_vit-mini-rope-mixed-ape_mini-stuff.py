# The mini distillation study's frozen probes of the width-48 students
# (mmpos_harness/distill_study.py): the method ranking's probe backbone with
# the APE of the 64 px pretraining grid, as configs/method_ranking/
# linear-probe_vit-tiny-rope-mixed-ape_mini-stuff.py adds it, at the
# students' width, 4 blocks of 48 channels and 3 heads; the head reads 48
# channels.
_base_ = ['../method_ranking/linear-probe_vit-tiny-rope-mixed_mini-stuff.py']
student_width = 48
model = dict(
    backbone=dict(
        arch=dict(embed_dims=student_width, num_layers=4, num_heads=3,
                  feedforward_channels=4 * student_width),
        use_ape=True,
        img_size=64),
    decode_head=dict(in_channels=student_width, channels=student_width))
