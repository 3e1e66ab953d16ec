"""RoPEVisionTransformer: shapes at any resolution, token/coordinate entry
point, APE variants, mmpretrain compatibility (names, checkpoints, layer
decay) and cross-scope building from mmdet/mmseg."""
import pytest
import torch
from mmengine.optim import build_optim_wrapper

import mmpos  # noqa: F401  (registers into mmpretrain)
from mmpos.models.backbones import RoPEVisionTransformer
from mmpos.models.layers.positions import grid_coords, sincos_pos_embed_2d

TINY = dict(embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64)


def tiny(**kwargs):
    torch.manual_seed(0)
    model = RoPEVisionTransformer(arch=TINY, **kwargs)
    model.init_weights()
    return model.eval()


@pytest.mark.parametrize('out_type', ['cls_token', 'featmap', 'avg_featmap',
                                      'raw'])
@pytest.mark.parametrize('rope_type', ['axial', 'mixed'])
def test_output_shapes_at_any_resolution(out_type, rope_type):
    model = tiny(out_type=out_type, rope=dict(type=rope_type), use_ape=True,
                 out_indices=(0, -1))
    for h, w in [(224, 224), (320, 320), (512, 512), (224, 320)]:
        gh, gw = h // 16, w // 16
        expected = {
            'cls_token': (2, 32),
            'featmap': (2, 32, gh, gw),
            'avg_featmap': (2, 32),
            'raw': (2, 1 + gh * gw, 32)
        }[out_type]
        with torch.no_grad():
            outs = model(torch.randn(2, 3, h, w))
        assert len(outs) == 2
        assert all(tuple(o.shape) == expected for o in outs), (h, w)


def test_input_not_a_multiple_of_the_patch_is_padded_on_the_grid():
    """As mmpretrain's ``PatchEmbed`` (``padding='corner'``): zeros at the
    bottom and right up to a multiple, and the padded patches are
    positioned as the grid they complete."""
    model = tiny(out_type='featmap')
    img = torch.randn(1, 3, 230, 224)
    padded = torch.nn.functional.pad(img, (0, 0, 0, 10))  # 240 x 224
    with torch.no_grad():
        out = model(img)[0]
        assert out.shape == (1, 32, 15, 14)
        assert torch.equal(out, model(padded)[0])
        tokens, hw = model.embed(img)
        assert hw == (15, 14)
        by_coords = model.forward_tokens(tokens, coords=grid_coords(*hw),
                                         hw=hw)[0]
    torch.testing.assert_close(by_coords, out, rtol=1e-5, atol=1e-5)


def test_invalid_options():
    with pytest.raises(ValueError, match='with_cls_token'):
        tiny(with_cls_token=False, out_type='cls_token')
    with pytest.raises(ValueError, match='out_type'):
        tiny(out_type='tokens')
    with pytest.raises(ValueError, match='ape_type'):
        tiny(use_ape=True, ape_type='rope')
    with pytest.raises(ValueError, match='out_indices'):
        tiny(out_indices=(2, ))
    with pytest.raises(TypeError, match='out_indices must be an int or a '
                       'sequence'):
        tiny(out_indices={1: 1})
    with pytest.raises(ValueError, match='Arch'):
        RoPEVisionTransformer(arch='huge')
    # a closed signature: the pre-``rope=dict`` arguments are unknown
    with pytest.raises(TypeError, match='rope_type'):
        tiny(rope_type='axial')


def test_arch_presets():
    for arch, dims, depth in [('tiny', 192, 12), ('small', 384, 12),
                              ('base', 768, 12), ('large', 1024, 24)]:
        settings = RoPEVisionTransformer.arch_zoo[arch]
        assert (settings['embed_dims'], settings['num_layers']) == (dims,
                                                                    depth)
        assert settings['embed_dims'] // settings['num_heads'] == 64


def test_without_cls_token():
    model = tiny(with_cls_token=False, out_type='raw')
    assert model(torch.randn(1, 3, 64, 96))[0].shape == (1, 24, 32)


@pytest.mark.parametrize('rope_type', ['axial', 'mixed'])
def test_forward_tokens_with_grid_coords_equals_forward(rope_type):
    model = tiny(rope=dict(type=rope_type), out_type='featmap')
    img = torch.randn(2, 3, 64, 96)
    tokens, hw = model.embed(img)
    assert hw == (4, 6) and tokens.shape == (2, 24, 32)
    expected = model(img)[0]
    by_coords = model.forward_tokens(tokens, coords=grid_coords(*hw), hw=hw)
    per_sample = model.forward_tokens(
        tokens, coords=grid_coords(*hw).expand(2, -1, -1), hw=hw)
    assert torch.allclose(by_coords[0], expected, atol=1e-5)
    assert torch.allclose(per_sample[0], expected, atol=1e-5)


@pytest.mark.parametrize('rope_type', ['axial', 'mixed'])
def test_subset_of_tokens_with_per_sample_fractional_coords(rope_type):
    """Without class token, a RoPE-only ViT sees relative positions only:
    shifting every token's coordinates by the same (fractional) offset changes
    no output. (The unrotated class token's logits against rotated patch keys
    do depend on absolute positions.)"""
    model = tiny(rope=dict(type=rope_type), out_type='raw',
                 with_cls_token=False)
    tokens, hw = model.embed(torch.randn(2, 3, 64, 64))
    keep = torch.stack([torch.randperm(16)[:5] for _ in range(2)])
    subset = torch.gather(tokens, 1, keep[..., None].expand(-1, -1, 32))
    coords = grid_coords(*hw)[keep] + torch.rand(2, 5, 2)  # (B, M, 2)
    out = model.forward_tokens(subset, coords=coords)[0]
    assert out.shape == (2, 5, 32)
    shifted = model.forward_tokens(
        subset, coords=coords + torch.tensor([0.37, -1.5]))[0]
    assert torch.allclose(out, shifted, atol=1e-5)
    # per-sample coordinates are really used per sample
    alone = model.forward_tokens(subset[1:], coords=coords[1])[0]
    assert torch.allclose(out[1:], alone, atol=1e-5)
    assert not torch.allclose(
        out, model.forward_tokens(subset, coords=coords * 2)[0], atol=1e-4)
    with pytest.raises(ValueError, match='coords` or `hw'):
        model.forward_tokens(subset)


def test_featmap_needs_matching_hw():
    model = tiny(out_type='featmap')
    tokens, _ = model.embed(torch.randn(1, 3, 64, 64))
    with pytest.raises(ValueError, match='featmap'):
        model.forward_tokens(tokens[:, :5], coords=torch.rand(5, 2))


def test_learnable_ape_is_interpolated_to_the_grid():
    model = tiny(use_ape=True, img_size=64)
    assert model.pos_embed.shape == (1, 1 + 16, 32)
    assert model.pos_embed.requires_grad
    img = torch.randn(1, 3, 96, 128)
    tokens, hw = model.embed(img)
    table = model.pos_embed[:, 1:].reshape(1, 4, 4, 32).permute(0, 3, 1, 2)
    resized = torch.nn.functional.interpolate(
        table, size=hw, mode='bicubic', align_corners=False)
    patches = model.patch_embed(img)[0]
    assert torch.allclose(tokens - patches,
                          resized.flatten(2).transpose(1, 2), atol=1e-6)


def test_sincos_ape_is_fixed_eq2_table():
    model = tiny(use_ape=True, ape_type='sincos', img_size=64)
    assert not model.pos_embed.requires_grad
    assert torch.equal(model.pos_embed[0, 0], torch.zeros(32))
    assert torch.allclose(model.pos_embed[0, 1:],
                          sincos_pos_embed_2d(grid_coords(4, 4), 32))


# mmpretrain's own cases (its tests/test_models/test_backbones/
# test_vision_transformer.py): dynamic input sizes, 256 x 309 not a multiple
# of the patch, several outputs, no class token, pre-norm; a small width.
MMPRETRAIN_ARCH = dict(embed_dims=32, num_layers=3, num_heads=2,
                       feedforward_channels=64)
MMPRETRAIN_CASES = [
    dict(),
    dict(out_indices=[-3, -2, -1], out_type='featmap'),
    dict(with_cls_token=False, out_type='featmap'),
    dict(out_type='avg_featmap', final_norm=False),
    dict(out_type='raw', pre_norm=True, layer_scale_init_value=0.1),
]


@pytest.mark.parametrize('case', MMPRETRAIN_CASES)
def test_without_rope_is_mmpretrains_vision_transformer(case):
    """``rope=None, use_ape=True`` is mmpretrain's ``VisionTransformer``:
    same state dict (its random weights load strictly), bitwise identical
    outputs on identical inputs of any size (a size that is not a multiple
    of the patch is padded by both), the same refusals."""
    from mmpretrain.models import VisionTransformer
    cfg = dict(arch=MMPRETRAIN_ARCH, img_size=224, patch_size=16, **case)
    torch.manual_seed(0)
    peer = VisionTransformer(**cfg)
    peer.init_weights()
    with torch.no_grad():  # away from the init (zero biases, unit norms)
        for param in peer.parameters():
            param.add_(torch.randn_like(param) * 0.1)
    model = RoPEVisionTransformer(**cfg, rope=None, use_ape=True)
    model.load_state_dict(peer.state_dict(), strict=True)
    for mode in (False, True):
        peer.train(mode)
        model.train(mode)
        for size in ((224, 224), (256, 256), (256, 309)):
            img = torch.randn(2, 3, *size)
            with torch.no_grad():
                theirs, ours = peer(img), model(img)
            assert len(ours) == len(theirs)
            assert all(torch.equal(a, b) for a, b in zip(ours, theirs))
    for bad in (dict(out_indices={1: 1}), dict(out_indices=[0, 13])):
        with pytest.raises(AssertionError):
            VisionTransformer(**dict(cfg, **bad))
        with pytest.raises((TypeError, ValueError), match='out_indices'):
            RoPEVisionTransformer(**dict(cfg, **bad), rope=None)


def test_state_dict_keeps_mixed_freqs_only():
    mixed = tiny(rope=dict(type='mixed')).state_dict()
    assert mixed['rope.freqs.1'].shape == (2, 2, 8)
    assert not any('rope' in k for k in tiny(rope=dict(type='axial'))
                   .state_dict())


def test_pos_embed_checkpoint_is_resized_on_load():
    src = tiny(use_ape=True, img_size=64)
    dst = tiny(use_ape=True, img_size=96)
    dst.load_state_dict(src.state_dict())
    assert dst.pos_embed.shape == (1, 1 + 36, 32)


def test_gradients_reach_every_mixed_frequency():
    model = tiny(rope=dict(type='mixed'), out_type='avg_featmap').train()
    out = model(torch.randn(2, 3, 48, 64))[0]
    (out * torch.randn_like(out)).sum().backward()
    for i, freqs in enumerate(model.rope.freqs):
        grad = freqs.grad
        assert grad is not None and grad.abs().sum() > 0, i


def test_autocast_forward():
    model = tiny(rope=dict(type='mixed'), out_type='featmap')
    img = torch.randn(1, 3, 64, 64)
    full = model(img)[0]
    with torch.autocast('cpu', dtype=torch.bfloat16):
        half = model(img)[0]  # fp32: the final LayerNorm runs in fp32
    assert torch.allclose(half.float(), full, atol=0.1, rtol=0.1)


def test_frozen_stages():
    model = tiny(frozen_stages=1, use_ape=True)
    model.train()
    assert not model.layers[0].training and model.layers[1].training
    frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    assert 'rope.freqs.0' in frozen and 'rope.freqs.1' not in frozen
    assert {'cls_token', 'pos_embed', 'patch_embed.projection.weight'} <= set(
        frozen)
    assert not any(n.startswith('layers.1') for n in frozen)


def test_layer_decay_constructor_scales_blocks_and_mixed_freqs():
    from mmpretrain.registry import MODELS
    classifier = MODELS.build(
        dict(type='ImageClassifier',
             backbone=dict(type='RoPEVisionTransformer', arch=TINY,
                           rope=dict(type='mixed'), use_ape=True),
             head=dict(type='LinearClsHead', num_classes=3, in_channels=32)))
    wrapper = build_optim_wrapper(
        classifier,
        dict(type='OptimWrapper',
             constructor='mmpretrain.LearningRateDecayOptimWrapperConstructor',
             optimizer=dict(type='AdamW', lr=1.0, weight_decay=0.05),
             paramwise_cfg=dict(layer_decay_rate=0.75,
                                custom_keys={'.freqs': dict(decay_mult=0.)})))
    groups = {g['param_name']: g for g in wrapper.optimizer.param_groups}
    scale = {name: g['lr_scale'] for name, g in groups.items()}
    # depth: stem 0, block i -> i + 1, rest 3; scale = 0.75 ** (3 - depth)
    assert scale['backbone.cls_token'] == pytest.approx(0.75**3)
    assert scale['backbone.patch_embed.projection.weight'] == pytest.approx(
        0.75**3)
    assert scale['backbone.layers.0.attn.qkv.weight'] == pytest.approx(0.75**2)
    assert scale['backbone.layers.1.attn.qkv.weight'] == pytest.approx(0.75)
    assert scale['backbone.rope.freqs.0'] == scale[
        'backbone.layers.0.attn.qkv.weight']
    assert scale['backbone.rope.freqs.1'] == scale[
        'backbone.layers.1.attn.qkv.weight']
    assert scale['head.fc.weight'] == 1.0
    assert groups['backbone.rope.freqs.1']['weight_decay'] == 0.


def test_builds_from_mmpretrain_mmdet_and_mmseg_registries():
    from mmdet.registry import MODELS as DET_MODELS
    from mmpretrain.registry import MODELS as PRETRAIN_MODELS
    from mmseg.registry import MODELS as SEG_MODELS
    cfg = dict(arch=TINY, rope=dict(type='axial'), out_type='featmap',
               out_indices=(0, 1), final_norm=False)
    model = PRETRAIN_MODELS.build(dict(type='RoPEVisionTransformer', **cfg))
    assert isinstance(model, RoPEVisionTransformer)
    for registry in (DET_MODELS, SEG_MODELS):
        model = registry.build(
            dict(type='mmpretrain.RoPEVisionTransformer', **cfg))
        assert isinstance(model, RoPEVisionTransformer)
        outs = model(torch.randn(1, 3, 64, 96))
        assert [o.shape for o in outs] == [(1, 32, 4, 6)] * 2


@pytest.mark.parametrize('window', [0, 2])
def test_freq_scaling_from_the_command_line_keeps_the_checkpoint(window):
    """The docs' ``--cfg-options model.backbone.rope.freq_scaling...`` on a
    shipped config: the trained state dict loads strictly, the training
    grid gives the same output and a larger grid (windowed blocks
    included) is rescaled."""
    from mmengine.config import Config

    from mmpos.apis import build_backbone
    cfg = Config.fromfile('configs/rope_vit/vit-mini_rope-mixed_mini-cls.py')
    if window:
        cfg.model.backbone.update(window_size=window, global_attn_indexes=[1],
                                  with_cls_token=False, out_type='featmap')
    torch.manual_seed(0)
    plain = build_backbone(cfg).eval()
    with torch.no_grad():  # logits far from 0 (the init's are ~1e-3)
        for name, param in plain.named_parameters():
            if 'qkv' in name:
                param.normal_(0, 0.5)
    cfg.merge_from_dict({'model.backbone.rope.freq_scaling.method': 'yarn',
                         'model.backbone.rope.freq_scaling.train_grid': 8})
    scaled = build_backbone(cfg)
    scaled.load_state_dict(plain.state_dict())  # strict: no new keys
    scaled.eval()
    assert scaled.rope.freq_scaling.train_grid == (8, 8)
    with torch.no_grad():
        for size, equal in ((64, True), (128, False)):
            x = torch.randn(2, 3, size, size)
            same = torch.allclose(scaled(x)[0], plain(x)[0], atol=1e-5)
            assert same == equal, size


def test_a_swiglu_block_computes_dinov3s_feed_forward():
    """``layer_cfgs=dict(ffn_cfg=dict(type='SwiGLUFFN'))`` (DINOv3 7B's
    feed-forward): each block's FFN adds ``w3(silu(x W1) * (x W2))`` of its
    normed input, scaled by its LayerScale, to the residual; the hidden
    width is ``feedforward_channels``; no GELU MLP is left."""
    import torch.nn.functional as F
    torch.manual_seed(0)
    model = RoPEVisionTransformer(
        arch=dict(embed_dims=32, num_layers=2, num_heads=2,
                  feedforward_channels=48),
        img_size=32, qkv_bias=False, layer_scale_init_value=0.5,
        layer_cfgs=dict(ffn_cfg=dict(type='SwiGLUFFN'))).eval()
    block = model.layers[0]
    assert block.ffn.w12.weight.shape == (2 * 48, 32)
    assert block.ffn.w3.weight.shape == (32, 48)
    assert block.attn.qkv.bias is None
    x = torch.randn(2, 5, 32)
    hidden = block.ln2(x)
    w1, w2 = block.ffn.w12.weight.chunk(2)
    b1, b2 = block.ffn.w12.bias.chunk(2)
    expected = x + 0.5 * block.ffn.w3(
        F.silu(hidden @ w1.T + b1) * (hidden @ w2.T + b2))
    torch.testing.assert_close(block.ffn(hidden, identity=x), expected)
    assert model(torch.randn(1, 3, 32, 32))[0].shape == (1, 32)
