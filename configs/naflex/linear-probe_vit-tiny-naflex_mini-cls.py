# Linear probe on NaFlex batches (CPU mini run, #57): the frozen 4-block mini
# RoPE-Mixed ViT (width 96, 8 px patches; every block, the patch embedding
# and the final norm frozen, eval mode) reads each mini classification image
# at its own aspect ratio, resized to at most 64 patches (timm's
# token-budget rule) and padded to the batch's longest sequence with a key
# mask (docs/user_guides/naflex.md); a linear head on the class token
# trains. Point the backbone at a pretrained checkpoint with
# --cfg-options model.backbone.init_cfg.checkpoint=PATH (e.g. the MAE run of
# ./mae_vit-tiny-naflex_mini.py after tools/model_converters/mmpos2backbone.py).
_base_ = ['../_base_/default_runtime_pretrain.py']
custom_imports = dict(imports=['mmpos'], allow_failed_imports=False)

patch_size, max_tokens = 8, 64
model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='RoPEVisionTransformer',
        arch=dict(embed_dims=96, num_layers=4, num_heads=3,
                  feedforward_channels=384),
        img_size=64, patch_size=patch_size, out_type='cls_token',
        rope=dict(type='mixed'), frozen_stages=4,
        init_cfg=dict(type='Pretrained', checkpoint=None,
                      prefix='backbone.')),
    neck=None,
    head=dict(type='LinearClsHead', num_classes=3, in_channels=96,
              loss=dict(type='CrossEntropyLoss')),
    data_preprocessor=dict(
        type='NaFlexDataPreprocessor',
        mean=[123.675, 116.28, 103.53],
        std=[58.395, 57.12, 57.375],
        to_rgb=True))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='NaFlexRandomResizedCrop', patch_size=patch_size,
         max_tokens=max_tokens, scale=(0.35, 1.), ratio=(1 / 2, 2.)),
    dict(type='RandomFlip', prob=0.5),
    dict(type='NaFlexPatchify', patch_size=patch_size),
    dict(type='PackNaFlexInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='NaFlexResize', patch_size=patch_size, max_tokens=max_tokens),
    dict(type='NaFlexPatchify', patch_size=patch_size),
    dict(type='PackNaFlexInputs'),
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
