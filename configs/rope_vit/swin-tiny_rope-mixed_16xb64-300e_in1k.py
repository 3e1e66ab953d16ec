# RoPE-Swin-T (RoPE-ViT Sec. 4.1, Fig. 5, Tables 2 and 4): mmpretrain's Swin-T
# 300-epoch ImageNet-1k recipe (batch 1024 = 16 GPUs x 64, AdamW lr 1e-3, wd
# 0.05, cosine, 20 warm-up epochs) with RoPE-Mixed in place of the relative
# position bias. The paper's five Swin schemes: model.backbone.rope.type
# (axial|mixed; rope=None: none) x model.backbone.use_rpb (RPB: rope=None
# with use_rpb).
_base_ = ['mmpretrain::swin_transformer/swin-tiny_16xb64_in1k.py']

custom_imports = dict(imports=['mmpos'], allow_failed_imports=False)
model = dict(
    backbone=dict(
        type='RoPESwinTransformer',
        rope=dict(type='mixed'),
        use_rpb=False,
        pad_small_map=True))  # maps below a window (small test inputs)
# As every RoPE schedule here: no weight decay on the RoPE-Mixed frequencies.
optim_wrapper = dict(
    paramwise_cfg=dict(custom_keys={'.freqs': dict(decay_mult=0.)}))
# mmpos' hook: deletes old checkpoints only after the new one is complete
default_hooks = dict(checkpoint=dict(type='mmpretrain.IntactCheckpointHook'))
