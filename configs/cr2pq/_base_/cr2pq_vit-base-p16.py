# CR2PQ model (§3.2): RoPE-Axial ViT-B/16 student on view A (Eq. 5/7), EMA
# teacher on view B, position-aware cross-attention (Eq. 8) with a 2-layer
# transformer local projector and a 2-layer MLP global projector (Table 5),
# L_patch + 0.5 L_global (Eq. 9-10, p = 2).
custom_imports = dict(imports=['mmpos'], allow_failed_imports=False)

embed_dims, num_heads = 768, 12
model = dict(
    type='CR2PQ',
    backbone=dict(
        type='RoPEVisionTransformer',
        arch='base',
        img_size=224,
        patch_size=16,
        # Eq. 5: rope.py's 100^(-t/(D/4)) = Eq. 5's 10000^(-t/(D/2))
        rope=dict(type='axial', theta=100.),
        out_type='featmap'),
    neck=dict(
        type='CR2PQNeck',
        embed_dims=embed_dims,
        num_heads=num_heads,
        out_channels=embed_dims,  # = teacher channels (EMA: the student's)
        pos_type='rope',  # Table 6: 'rope' | 'sincos' | 'mlp' (pos_ablation/)
        rope=dict(type='axial', theta=100.),
        local_projector='transformer',  # Table 5: 'transformer' | 'mlp'
        local_depth=2,
        hidden_channels=2048,
        global_depth=2),
    loss=dict(type='CR2PQLoss', p=2., global_weight=0.5, norm='l2'),
    target='ema',
    base_momentum=0.004,  # BYOL: tau 0.996 -> 1 (cosine)
    align='center',
    data_preprocessor=dict(
        type='SelfSupDataPreprocessor',
        mean=[123.675, 116.28, 103.53],
        std=[58.395, 57.12, 57.375],
        to_rgb=True))
