# End-to-end ImageNet-1K fine-tuning of a QB-Heat Mobile-Former-285M with
# its tran-1 decoder (QB-Heat App. B.1, Tab. 12; results in Tab. 4 / 6).
# Encoder and decoder both train (every stage, token and BatchNorm) and
# start from the tran-1 probe's last checkpoint (`load_from`): "the decoder
# weights are initialized from tran-1 probing", and the probe's encoder is
# the frozen QB-Heat encoder. AdamW, lr 5e-4 x 512 / 256, wd 0.05,
# layer-wise lr decay 0.90, batch 512 (8 GPUs x 64), cosine decay after 5
# warm-up epochs, 200 epochs, RandAug (9, 0.5), label smoothing 0.1,
# dropout 0.2, random erasing 0.25, no mixup / cutmix (MF-285M).
#
# Layer-wise lr decay as mmpretrain applies it to a ViT, over the paper's
# 12 Mobile-Former blocks (Tab. 8: the lite bottleneck + 11 M-F blocks):
# depth 0 = stem and global tokens, 1 = lite bottleneck, 2-12 = the M-F
# blocks, 13 = final 1x1 conv and decoder; lr x rate ** (13 - depth). Given
# as per-module lr multipliers (`custom_keys`, so backbone biases and norms
# keep the weight decay), which need no `get_layer_depth` of the backbone.
# Probe checkpoint:  --cfg-options load_from=PATH
_base_ = ['../probing/mobileformer-285m_tran1-probe_8xb512-coslr-200e_in1k.py']

model = dict(
    backbone=dict(frozen_stages=-1, norm_eval=False, init_cfg=None),
    head=dict(dropout=0.2))
load_from = ('work_dirs/mobileformer-285m_tran1-probe_8xb512-coslr-200e_'
             'in1k/epoch_200.pth')

train_pipeline = _base_.train_pipeline
train_pipeline[4].erase_prob = 0.25
train_dataloader = dict(batch_size=64, dataset=dict(pipeline=train_pipeline))

layer_decay_rate = 0.9
layer_depths = {
    'backbone.tokens': 0,
    'backbone.stem.': 0,
    'backbone.lite.': 1,
    **{f'backbone.blocks.{i}.': i + 2 for i in range(11)},
}
optim_wrapper = dict(
    optimizer=dict(lr=5e-4 * 512 / 256, weight_decay=0.05),
    paramwise_cfg=dict(custom_keys={
        key: dict(lr_mult=layer_decay_rate**(13 - depth))
        for key, depth in layer_depths.items()
    }))
# the cosine phase ends with training: the Runner sets its `end` (and so
# T_max) to train_cfg.max_epochs, which the larger encoders change
warmup_epochs = 5
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, begin=0,
         end=warmup_epochs, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-6, by_epoch=True,
         begin=warmup_epochs, convert_to_iter_based=True)
]
train_cfg = dict(max_epochs=200)
auto_scale_lr = dict(base_batch_size=512)
