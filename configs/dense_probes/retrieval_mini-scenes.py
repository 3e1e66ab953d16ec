# In-context dense retrieval (Hummingbird; Open Hummingbird's settings, see
# configs/dense_probes/retrieval_voc.py) on mini-scenes, the probe's own
# mini data (CPU): material objects on photo
# backgrounds in Pascal VOC's layout, 0 = background, 255 = void,
# 256 training images (the memory, 2 augmented passes) and 256 validation
# images (one image moves the mIoU by less than 0.5 point). Written by
# `python tools/misc/make_mini_data.py data/mini --which scenes --img-size 64
# --num-train 256`.
data_root = 'data/mini/scenes/'
# read by mmseg's BaseSegDataset; the classes are
# mmpos_harness.mini_data.scenes.MINI_SCENES_CLASSES
scenes_dataset = dict(
    type='BaseSegDataset',
    data_root=data_root,
    metainfo=dict(classes=('background', 'brick', 'grass', 'gravel', 'moon',
                           'fur', 'cells', 'coins', 'stars')),
    data_prefix=dict(img_path='JPEGImages', seg_map_path='SegmentationClass'),
    img_suffix='.jpg',
    seg_map_suffix='.png',
    reduce_zero_label=False,
    ignore_index=255,
    pipeline=[
        dict(type='LoadImageFromFile'),
        dict(type='LoadAnnotations'),
        dict(type='PackSegInputs')
    ])
train_dataloader, val_dataloader = (
    dict(batch_size=4, num_workers=0, persistent_workers=False,
         sampler=dict(type='DefaultSampler', shuffle=False),
         dataset=dict(scenes_dataset,
                      ann_file=f'ImageSets/Segmentation/{split}.txt'))
    for split in ('train', 'val'))
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator

retrieval_probe = dict(size=64, k=30, temperature=0.02, augment_epochs=2)
