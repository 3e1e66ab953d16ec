# mini-objects written by tools/misc/make_mini_data.py (--which objects):
# mini-COCO's layout and pipelines at the generator's native 64px, 8
# material classes (MiniObjectsDataset's own metainfo), read by that
# CocoDataset subclass and scored by CocoMetric. Leaf configs add
# 'mmpos_harness.mini_data.datasets' to `custom_imports`.
_base_ = ['./mini_coco_instance.py']

data_root = 'data/mini/objects/'
image_scale = (64, 64)
train_pipeline = [
    dict(step, scale=image_scale) if step['type'] == 'Resize' else step
    for step in _base_.train_pipeline
]
test_pipeline = [
    dict(step, scale=image_scale) if step['type'] == 'Resize' else step
    for step in _base_.test_pipeline
]
mini_objects_dataset = dict(
    type='MiniObjectsDataset', data_root=data_root, metainfo=None)
# InfiniteSampler: a small split ends an epoch every few iterations, and
# mmengine sleeps 2 s at every restart of the dataloader.
train_dataloader = dict(
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(
        **mini_objects_dataset,
        filter_cfg=dict(filter_empty_gt=True, min_size=2),
        pipeline=train_pipeline))
val_dataloader = dict(
    dataset=dict(**mini_objects_dataset, pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=data_root + 'annotations/instances_val2017.json')
test_evaluator = val_evaluator
