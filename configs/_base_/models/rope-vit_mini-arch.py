# The tiny ViT used by the demo and the tests on the mini datasets (CPU).
mini_vit_arch = dict(
    embed_dims=96, num_layers=4, num_heads=3, feedforward_channels=384)
