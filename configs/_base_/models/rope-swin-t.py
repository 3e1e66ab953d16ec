# RoPE-Swin-T (RoPE-ViT Sec. 4.1): mmpretrain's Swin-T with RoPE-Mixed in
# every window attention instead of the relative position bias, window 7 (as
# pretrained). Spliced in with `backbone=_base_.rope_swin_t`; the paper's five
# schemes are rope.type (axial|mixed; rope=None: none) x use_rpb.
# Pretrained checkpoint: model.backbone.init_cfg.checkpoint=PATH. Configs
# using it import mmpos (custom_imports).
rope_swin_t = dict(
    _delete_=True,
    type='mmpretrain.RoPESwinTransformer',
    arch='tiny',
    window_size=7,
    rope=dict(type='mixed'),
    use_rpb=False,
    drop_path_rate=0.3,
    pad_small_map=True,  # maps smaller than a window: pad (dense inputs)
    out_indices=(0, 1, 2, 3),
    init_cfg=dict(type='Pretrained', checkpoint=None, prefix='backbone.'))
