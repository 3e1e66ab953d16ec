"""Converted timm checkpoints give timm's own tokens in mmpos.

timm (pinned in requirements/tests.txt) builds each model with
``pretrained=False``, depth 2 and width 192 (3 heads of 64 channels, the
head size of the released ViT-S/B, so RoPE's tables are theirs); every
tensor is then re-drawn
(:func:`redraw`), because timm's initialisation (LayerScale 1e-5) leaves the
blocks near identity and the tokens nearly independent of position. The
state dict goes through the converter, mmpos builds the model the converter
infers, and both run the same images: the training size, an extrapolated
size and a non-square size. Tolerance: 1e-5 relative to the tokens' scale
(fp32). timm resamples APE tables with ``antialias=True``, mmpretrain's
``resize_pos_embed`` without; the comparison at other sizes builds the timm
model at that size with the table resampled without antialias, and a
separate test measures the difference antialias makes.
"""
import re

import pytest
import torch

timm = pytest.importorskip('timm')

from mmpos.models.backbones import RoPEVisionTransformer  # noqa: E402
from mmpos.checkpoint import strip_prefix  # noqa: E402
from mmpos.converters import (convert_timm_vit,  # noqa: E402
                                         infer_vit_config)

SIZES = [(224, 224), (288, 288), (224, 320)]
SMALL = dict(depth=2, embed_dim=192, num_heads=3)
NAVER = ['vit_small_patch16_rope_224', 'vit_small_patch16_rope_mixed_224',
         'vit_small_patch16_rope_ape_224',
         'vit_small_patch16_rope_mixed_ape_224']


def redraw(model: torch.nn.Module, seed: int = 0) -> dict:
    """Re-draw every parameter so position matters; returns the state dict.

    Matrices ~ N(0, 1.5^2 / fan_in) (peaked attention), tokens and biases
    N(0, 0.05^2), pos_embed N(0, 0.5^2), norm weights and layer scales
    1 + N(0, 0.1^2); RoPE-Mixed frequencies keep timm's random init."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name == 'rope.freqs':
                continue
            noise = torch.randn(p.shape, generator=g)
            if name == 'pos_embed':
                p.copy_(noise * 0.5)
            elif p.dim() == 1 and ('norm' in name or 'gamma' in name):
                p.copy_(1 + noise * 0.1)
            elif p.dim() >= 2 and 'token' not in name:
                p.copy_(noise * 1.5 / p[0].numel()**0.5)
            else:
                p.copy_(noise * 0.05)
    return {k: v.clone() for k, v in model.state_dict().items()}


def timm_at(name: str, state: dict, size, **kwargs) -> torch.nn.Module:
    """timm model ``name`` built for ``size`` holding ``state``; its APE
    table resampled to the new grid without antialias."""
    model = timm.create_model(name, pretrained=False, num_classes=0,
                              img_size=size, **kwargs).eval()
    state = dict(state)
    if 'pos_embed' in state and state['pos_embed'].shape != \
            model.pos_embed.shape:
        prefix = 0 if getattr(model, 'no_embed_class', False) else \
            model.num_prefix_tokens
        state['pos_embed'] = timm.layers.resample_abs_pos_embed(
            state['pos_embed'], model.patch_embed.grid_size,
            num_prefix_tokens=prefix, antialias=False)
    model.load_state_dict(state, strict=True)
    return model


def mmpos_from(converted: dict, rope_type: str, rope_options=None,
               **overrides):
    """Backbone of :func:`infer_vit_config` (``out_type='raw'``) loaded
    strictly with the converted ``backbone.*`` tensors."""
    cfg = infer_vit_config(converted, None, rope_type,
                           rope_options)['backbone']
    cfg.pop('type')
    cfg.update(out_type='raw', **overrides)
    model = RoPEVisionTransformer(**cfg).eval()
    model.load_state_dict(strip_prefix(converted, 'backbone.'), strict=True)
    return model


def assert_close(ours, theirs, rtol=1e-5):
    scale = theirs.abs().max()
    err = (ours - theirs).abs().max()
    assert err <= rtol * scale, f'max error {err:.3g} vs scale {scale:.3g}'


@pytest.mark.parametrize('name', NAVER)
def test_naver_rope_vits_match_timm(name):
    base = timm.create_model(name, pretrained=False, num_classes=0, **SMALL)
    state = redraw(base)
    rope_type = 'mixed' if 'mixed' in name else 'axial'
    ours = mmpos_from(convert_timm_vit(state), rope_type)
    no_rope = mmpos_from(convert_timm_vit(state), rope_type)
    no_rope.rope = None
    torch.manual_seed(0)
    for size in SIZES:
        img = torch.randn(1, 3, *size)
        theirs = timm_at(name, state, size, **SMALL)
        with torch.no_grad():
            expected = theirs.forward_features(img)
            assert_close(ours(img)[0], expected)
            # position matters: the same weights without RoPE differ
            assert (no_rope(img)[0] - expected).abs().max() > \
                0.05 * expected.abs().max()


def test_timm_ape_antialias_differs_from_plain_bicubic():
    """timm resamples APE with antialias (PIL's cubic, a=-0.5);
    mmpretrain's bicubic does not (a=-0.75): the converted model matches
    timm only up to that choice at other sizes."""
    name = 'vit_small_patch16_rope_ape_224'
    state = redraw(timm.create_model(name, pretrained=False, num_classes=0,
                                     **SMALL))
    grid = state['pos_embed']
    plain = timm.layers.resample_abs_pos_embed(grid, (18, 18), (14, 14), 0,
                                               antialias=False)
    aa = timm.layers.resample_abs_pos_embed(grid, (18, 18), (14, 14), 0,
                                            antialias=True)
    assert (plain - aa).abs().max() > 1e-2 * grid.abs().max()


DINOV3 = ['vit_small_patch16_dinov3', 'vit_small_patch16_dinov3_qkvb']


@pytest.mark.parametrize('name', DINOV3)
def test_dinov3_vits_match_timm(name):
    """Normalised patch centres, base-100 periods, rotate-half layout,
    4 registers, LayerScale and (``_qkvb``) a zero key bias."""
    theirs = timm.create_model(name, pretrained=False, num_classes=0,
                               **SMALL).eval()
    state = redraw(theirs)
    converted = convert_timm_vit(state)
    if name.endswith('_qkvb'):
        assert converted['backbone.layers.0.attn.qkv.bias'][192:384].eq(
            0).all()
    ours = mmpos_from(converted, 'dinov3')
    assert ours.register_tokens.shape == (1, 4, 192)
    torch.manual_seed(0)
    for size in SIZES:
        img = torch.randn(2, 3, *size)
        with torch.no_grad():
            expected = theirs.forward_features(img)
            assert_close(ours(img)[0], expected)
            # dense outputs leave the class token and the registers out
            ours.out_type = 'featmap'
            featmap = ours(img)[0]
            ours.out_type = 'raw'
        h, w = size[0] // 16, size[1] // 16
        assert torch.equal(featmap.flatten(2).transpose(1, 2),
                           ours(img)[0][:, 5:])
        assert featmap.shape == (2, 192, h, w)


def test_dinov3_coordinate_augmentation_matches_timm_in_training():
    """shift / jitter / rescale drawn from torch's generator in DINOv3's
    order: with a batch of one and the same seed, timm's and mmpos' training
    forward passes see the same augmented positions."""
    aug = dict(shift=0.1, jitter=1.5, rescale=2.)
    name = 'vit_small_patch16_dinov3'
    theirs = timm.create_model(
        name, pretrained=False, num_classes=0, **SMALL,
        rope_shift_coords=aug['shift'], rope_jitter_coords=aug['jitter'],
        rope_rescale_coords=aug['rescale'])
    state = redraw(theirs)
    ours = mmpos_from(convert_timm_vit(state), 'dinov3',
                      dict(coords=dict(frame='separate', **aug)))
    theirs.train()
    ours.train()
    img = torch.randn(1, 3, 224, 320)
    outs = []
    for model in (theirs, ours, theirs):
        torch.manual_seed(7)
        with torch.no_grad():
            out = model.forward_features(img) if model is theirs \
                else model(img)[0]
        outs.append(out)
    assert_close(outs[1], outs[0])
    with torch.no_grad():
        torch.manual_seed(8)
        other = ours(img)[0]
        ours.eval()
        plain = ours(img)[0]
    # the draw changes the tokens; evaluation does not augment
    assert (other - outs[1]).abs().max() > 1e-3 * outs[1].abs().max()
    assert (plain - outs[1]).abs().max() > 1e-3 * outs[1].abs().max()
    assert_close(plain, theirs.eval().forward_features(img))


def official_dinov3_layout(state: dict, head_dim: int) -> dict:
    """timm DINOv3 state dict -> facebookresearch/dinov3 key layout (the
    inverse of timm's ``eva.checkpoint_filter_fn``), periods stored in bf16
    as the released weights."""
    out = {}
    for key, value in state.items():
        key = key.replace('reg_token', 'storage_tokens')
        key = key.replace('gamma_1', 'ls1.gamma').replace('gamma_2',
                                                          'ls2.gamma')
        if key.endswith('attn.v_bias'):
            continue
        if key.endswith('attn.q_bias'):
            base = key[:-len('q_bias')]
            v = state[base.replace('storage_tokens', 'reg_token') + 'v_bias']
            # the key bias is trained but masked to zero in the forward
            out[base + 'qkv.bias'] = torch.cat((value, torch.randn_like(
                value), v))
            out[base + 'qkv.bias_mask'] = torch.cat(
                (torch.ones_like(value), torch.zeros_like(value),
                 torch.ones_like(value)))
            continue
        out[key] = value
    quarter = head_dim // 4
    out['rope_embed.periods'] = (100.**(torch.arange(quarter) / quarter)).to(
        torch.bfloat16)
    out['mask_token'] = torch.zeros(1, state['cls_token'].shape[-1])
    return out


def test_official_dinov3_layout_converts_to_timms_outputs():
    name = 'vit_small_patch16_dinov3_qkvb'
    theirs = timm.create_model(name, pretrained=False, num_classes=0,
                               **SMALL).eval()
    state = redraw(theirs)
    official = official_dinov3_layout(state, 64)
    # the layout written here is the one timm's own filter reads
    filtered = timm.models.eva.checkpoint_filter_fn(official, theirs)
    assert filtered.keys() == state.keys()
    assert all(torch.equal(filtered[k], state[k]) for k in state)

    from mmpos.converters import convert_dinov3_official
    converted, periods = convert_dinov3_official(official)
    assert periods == dict(base=100.)
    ours = mmpos_from(converted, 'dinov3', dict(periods=periods))
    img = torch.randn(2, 3, 224, 288)
    with torch.no_grad():
        assert_close(ours(img)[0], theirs.forward_features(img))


def test_dinov2_registers_match_timm():
    name = 'vit_small_patch14_reg4_dinov2'
    kwargs = SMALL
    base = timm.create_model(name, pretrained=False, num_classes=0,
                             img_size=224, **kwargs)
    state = redraw(base)
    converted = convert_timm_vit(state)
    ours = mmpos_from(converted, 'none')
    assert ours.num_register_tokens == 4 and ours.use_ape
    torch.manual_seed(0)
    for size in [(224, 224), (280, 280), (224, 308)]:
        img = torch.randn(1, 3, *size)
        theirs = timm_at(name, state, size, **kwargs)
        with torch.no_grad():
            assert_close(ours(img)[0], theirs.forward_features(img))


def test_official_dinov3_swiglu_converts_to_timms_outputs():
    """DINOv3's SwiGLU blocks (the S+ and 7B, ``mlp.w1/w2/w3`` in the
    released layout, timm's ``fc1_g/fc1_x/fc2``): converted to mmpretrain's
    SwiGLUFFN, the backbone gives timm's outputs."""
    name = 'vit_small_plus_patch16_dinov3'
    theirs = timm.create_model(name, pretrained=False, num_classes=0,
                               **SMALL).eval()
    state = redraw(theirs)
    names = {'fc1_g': 'w1', 'fc1_x': 'w2', 'fc2': 'w3'}
    official = official_dinov3_layout(
        {re.sub(r'mlp\.(fc1_g|fc1_x|fc2)\.',
                lambda m: f'mlp.{names[m.group(1)]}.', k): v
         for k, v in state.items()}, 64)
    filtered = timm.models.eva.checkpoint_filter_fn(official, theirs)
    assert filtered.keys() == state.keys()

    from mmpos.converters import convert_dinov3_official
    converted, periods = convert_dinov3_official(official)
    assert not [k for k in converted if '.mlp.' in k]
    ours = mmpos_from(converted, 'dinov3', dict(periods=periods))
    assert type(ours.layers[0].ffn).__name__ == 'SwiGLUFFN'
    img = torch.randn(2, 3, 224, 288)
    with torch.no_grad():
        assert_close(ours(img)[0], theirs.forward_features(img))
