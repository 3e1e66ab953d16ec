# DropPos model (paper §3, Table A): ViT-B/16 with fixed 2-D sin-cos APE and
# MAE's init (MAERoPEViT without RoPE; DropPos masks, the encoder's own
# mask_ratio is unused), a
# 2-block 512-wide position decoder over the N = 14 x 14 positions,
# gamma = gamma_pos = 0.75, sigma 1 -> 0 (DropPosSigmaHook), tau = 0.1,
# position smoothing exp(-(dx^2 + dy^2) / sigma^2) as in the authors'
# engine_pretrain.py (distance='euclidean' is Eq. 5 as printed).
custom_imports = dict(imports=['mmpos'], allow_failed_imports=False)

model = dict(
    type='DropPos',
    backbone=dict(
        type='MAERoPEViT',
        arch='b',
        img_size=224,
        patch_size=16,
        rope=None,
        use_ape=True,
        ape_type='sincos'),
    head=dict(
        type='DropPosHead',
        num_patches=196,
        in_channels=768,
        embed_dims=512,
        num_layers=2,
        num_heads=16,
        sigma=1.0,
        tau=0.1,
        distance='squared'),
    mask_ratio=0.75,
    pos_mask_ratio=0.75,
    affinity_source='full',
    init_cfg=[
        dict(type='Xavier', layer='Linear', distribution='uniform'),
        dict(type='Constant', layer='LayerNorm', val=1.0, bias=0.0)
    ])
custom_hooks = [dict(type='DropPosSigmaHook', start=1.0, end=0.0)]
