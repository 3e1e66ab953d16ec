# Demo / test config: Swin-Mask2Former (the RoPE-ViT Table 4 protocol,
# ../transfer/mmseg/mask2former_swin-t-rope-mixed_8xb2-160k_ade20k-512x512.py)
# shrunk for CPU: a 4-stage RoPE-Swin of widths 32..256 (one block per stage
# but two in stage 3, 4x4 windows, RoPE-Mixed, no RPB), mmseg's Mask2Former
# head with 64-d queries and pixel decoder (mmdet's MSDeformAttnPixelDecoder,
# 1 encoder layer), 3 transformer-decoder layers, 20 queries, 1024 sampled
# points per mask; trained from scratch on mini-ADE (128px crops) with the
# recipe's AdamW (backbone x0.1, clip 0.01) at lr 1e-3 and scored by the real
# IoUMetric. Checkpoint: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    'mmseg::mask2former/mask2former_swin-t_8xb2-160k_ade20k-512x512.py',
    '../_base_/models/rope-swin-t.py',
    '../_base_/datasets/mini_ade_loaders.py'
]
pretrained = None  # the base's download; ours is init_cfg.checkpoint
custom_imports = dict(
    imports=['mmdet.models', 'mmpos', 'mmpos_harness.mini_data.datasets'],
    allow_failed_imports=False)

num_classes = 6  # MiniADEDataset
crop_size = (128, 128)
widths = [32, 64, 128, 256]
dims = 64
attn = dict(embed_dims=dims, num_heads=4)
ffn = dict(embed_dims=dims, feedforward_channels=2 * dims)
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(
        _base_.rope_swin_t,
        arch=dict(embed_dims=widths[0], depths=[1, 1, 2, 1],
                  num_heads=[2, 4, 8, 16]),
        window_size=4,
        drop_path_rate=0.),
    decode_head=dict(
        in_channels=widths,
        feat_channels=dims,
        out_channels=dims,
        num_classes=num_classes,
        num_queries=20,
        pixel_decoder=dict(
            encoder=dict(
                num_layers=1,
                layer_cfg=dict(self_attn_cfg=attn, ffn_cfg=ffn)),
            positional_encoding=dict(num_feats=dims // 2)),
        positional_encoding=dict(num_feats=dims // 2),
        transformer_decoder=dict(
            num_layers=3,
            layer_cfg=dict(self_attn_cfg=attn, cross_attn_cfg=attn,
                           ffn_cfg=ffn)),
        # every class 1.0, "no object" 0.1 (as the recipe's 150 + 1)
        loss_cls=dict(class_weight=[1.0] * num_classes + [0.1]),
        train_cfg=dict(num_points=1024)))

train_dataloader = _base_.mini_ade_train_dataloader
val_dataloader = _base_.mini_ade_val_dataloader
test_dataloader = val_dataloader

# the mini runs' 300-iteration loop (../_base_/schedules/mmdet_mini_300it.py)
train_cfg = dict(
    _delete_=True, type='IterBasedTrainLoop', max_iters=300, val_interval=300)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=30),
    dict(type='CosineAnnealingLR', by_epoch=False, begin=30, end=300,
         T_max=270)
]
default_hooks = dict(
    logger=dict(interval=20),
    checkpoint=dict(type='mmpretrain.IntactCheckpointHook', by_epoch=False,
                    interval=300),
    visualization=dict(draw=False),
    check_loss=dict(type='mmpretrain.NonFiniteLossHook'))
optim_wrapper = dict(optimizer=dict(lr=1e-3))
auto_scale_lr = dict(enable=False, base_batch_size=4)
randomness = dict(seed=0)
