# Linear probe on NaFlex batches (CPU mini run, #57): the frozen 4-block mini
# RoPE-Mixed ViT (width 96, 8 px patches; every block, the patch embedding
# and the final norm frozen, eval mode) reads each mini classification image
# at its own aspect ratio, resized to at most 64 patches (timm's
# token-budget rule) and padded to the batch's longest sequence with a key
# mask (docs/user_guides/naflex.md); a linear head on the class token
# trains. Point the backbone at a pretrained checkpoint with
# --cfg-options model.backbone.init_cfg.checkpoint=PATH (e.g. the MAE run of
# ./mae_vit-tiny-naflex_mini.py after tools/model_converters/mmpos2backbone.py).
_base_ = ['./_base_/naflex_mini.py', '../_base_/default_runtime_pretrain.py']

max_tokens = 64
model = dict(
    type='ImageClassifier',
    backbone=dict(
        _base_.mini_vit, img_size=64, out_type='cls_token', frozen_stages=4,
        init_cfg=dict(type='Pretrained', checkpoint=None,
                      prefix='backbone.')),
    neck=None,
    head=dict(type='LinearClsHead', num_classes=3, in_channels=96,
              loss=dict(type='CrossEntropyLoss')),
    data_preprocessor=_base_.naflex_preprocessor)

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='NaFlexRandomResizedCrop', patch_size=_base_.patch_size,
         max_tokens=max_tokens, scale=(0.35, 1.), ratio=(1 / 2, 2.)),
    dict(type='RandomFlip', prob=0.5),
    *_base_.naflex_pack,
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='NaFlexResize', patch_size=_base_.patch_size,
         max_tokens=max_tokens),
    *_base_.naflex_pack,
]
data_root = 'data/mini/cls/'
train_dataloader, val_dataloader = (
    dict(batch_size=16, num_workers=0, persistent_workers=False,
         sampler=dict(type='DefaultSampler', shuffle=shuffle),
         collate_fn=dict(type='naflex_collate'),
         dataset=dict(type='CustomDataset', data_root=data_root,
                      data_prefix=split, pipeline=pipeline))
    for split, pipeline, shuffle in [('train', train_pipeline, True),
                                     ('val', test_pipeline, False)])
test_dataloader = val_dataloader
val_evaluator = dict(type='Accuracy', topk=(1, ))
test_evaluator = val_evaluator

max_iters = 60
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-2, weight_decay=0.))
param_scheduler = [
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=False, begin=0,
         end=max_iters),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters,
                 val_interval=max_iters)
val_cfg = dict()
test_cfg = dict()
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=10),
    checkpoint=dict(type='IntactCheckpointHook', by_epoch=False,
                    interval=max_iters, max_keep_ckpts=1))
log_processor = dict(by_epoch=False)
