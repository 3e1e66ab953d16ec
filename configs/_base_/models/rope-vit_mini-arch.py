# The tiny ViT used by the demo and the tests on the mini datasets (CPU).
mini_vit_arch = dict(
    embed_dims=96, num_layers=4, num_heads=3, feedforward_channels=384)
# What the mini demos with multi-level necks change in a dense model's
# backbone: the tiny ViT with stride-8 patches, all 4 blocks out; the
# DeconvMultiLevelNeck scales (2, 1, 1/2, 1/4) then give strides 4..32.
mini_mln_backbone = dict(
    arch=dict(_delete_=True, **mini_vit_arch),
    patch_size=8,
    drop_path_rate=0.,
    out_indices=(0, 1, 2, 3))
mini_mln_scales = (2.0, 1.0, 0.5, 0.25)
