# QB-Heat model (Sec. 4.2): Mobile-Former-285M encoder (Tab. 8, last stage
# at stride 16) on the unmasked quarter-block; 512-d projection + 8 explicit
# linear models per scale (one per direction; Tab. 2's default row (a)
# "corner + center" reports the numbers of row (b) "8", as do Tab. 4 and 6;
# num_explicit=2 is the A, B pair of Eq. 5), corner + centre quarters mixed
# half/half in every batch (Tab. 2a); MAE-style decoder of 6 transformer
# blocks, width 512, reconstructing 16x16 pixel patches of the masked
# quarters.
custom_imports = dict(imports=['mmpos'], allow_failed_imports=False)

model = dict(
    type='QBHeat',
    position='mixed',
    backbone=dict(type='MobileFormer', arch='285m', out_indices=(4, )),
    neck=dict(
        type='QBHeatPredictor',
        in_channels=720,
        embed_dims=512,
        num_explicit=8,
        positions=('corner', 'center')),
    head=dict(
        type='QBHeatHead',
        in_channels=512,
        num_layers=6,
        num_heads=16,
        mlp_ratio=4.,
        patch_size=16,
        norm_pix=True,
        loss=dict(type='PixelReconstructionLoss', criterion='L2')),
    data_preprocessor=dict(
        type='SelfSupDataPreprocessor',
        mean=[123.675, 116.28, 103.53],
        std=[58.395, 57.12, 57.375],
        to_rgb=True))
