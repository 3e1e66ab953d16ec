# mini-ADE (./mini_ade_loaders.py) on mmseg's ADE20K base (evaluator, TTA
# pipeline). Leaf configs add 'mmpos_harness.mini_data.datasets' to
# `custom_imports`.
_base_ = ['mmseg::_base_/datasets/ade20k.py', './mini_ade_loaders.py']

data_root = _base_.mini_ade_root
crop_size = (128, 128)
train_pipeline = _base_.mini_ade_train_pipeline
test_pipeline = _base_.mini_ade_test_pipeline
train_dataloader = _base_.mini_ade_train_dataloader
val_dataloader = _base_.mini_ade_val_dataloader
test_dataloader = val_dataloader
