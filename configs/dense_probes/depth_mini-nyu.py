# The linear depth probe on mini-NYU (CPU): depth_nyu.py on the
# 64 px rooms of `python tools/misc/make_mini_data.py data/mini --which nyu
# --img-size 64 --num-val 256`, evaluated at 64 px (the Eigen crop scaled
# to 64 x 64: rows 6:62, columns 4:60): a shorter schedule, at a lr that
# fits the head in it (tests/harness/test_mini_depth.py: features that
# carry depth are read).
_base_ = ['./depth_nyu.py']

data_root = 'data/mini/nyu'
depth_probe = dict(size=64, iters=300, lr=1e-2)
train_dataloader = dict(dataset=dict(data_root=data_root))
val_dataloader = dict(dataset=dict(data_root=data_root))
test_dataloader = val_dataloader
