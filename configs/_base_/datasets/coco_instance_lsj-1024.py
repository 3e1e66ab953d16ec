# COCO instances at 1024x1024, large-scale jitter (./lsj-1024_pipelines.py).
_base_ = ['mmdet::_base_/datasets/coco_instance.py', './lsj-1024_pipelines.py']
train_dataloader = dict(dataset=dict(pipeline=_base_.lsj_train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=_base_.lsj_test_pipeline))
test_dataloader = val_dataloader
