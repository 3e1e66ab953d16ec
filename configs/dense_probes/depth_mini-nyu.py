# The linear depth probe on mini-NYU (CPU, seconds): depth_nyu.py on the
# 64 px rooms of `python tools/misc/make_mini_data.py data/mini --which nyu
# --img-size 64 --num-val 32`, evaluated at 64 px without the Eigen crop
# (defined for 480 x 640 frames only), a shorter schedule.
_base_ = ['./depth_nyu.py']

data_root = 'data/mini/nyu'
depth_probe = dict(size=64, iters=300)
train_dataloader = dict(dataset=dict(data_root=data_root))
val_dataloader = dict(dataset=dict(data_root=data_root))
test_dataloader = val_dataloader
val_evaluator = dict(crop_type=None)
test_evaluator = val_evaluator
