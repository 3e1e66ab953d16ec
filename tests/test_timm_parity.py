"""Converted timm checkpoints give timm's own tokens in mmpos.

timm (pinned in requirements/tests.txt) builds each model with
``pretrained=False`` and depth 2; every tensor is then re-drawn
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
import pytest
import torch

timm = pytest.importorskip('timm')

from mmpos.models.backbones import RoPEVisionTransformer  # noqa: E402
from mmpos.utils.checkpoint_convert import (convert_timm_vit,  # noqa: E402
                                            infer_vit_config, strip_prefix)

SIZES = [(224, 224), (288, 288), (224, 320)]
NAVER = ['vit_small_patch16_rope_224', 'vit_small_patch16_rope_mixed_224',
         'vit_small_patch16_rope_ape_224',
         'vit_small_patch16_rope_mixed_ape_224']


def redraw(model: torch.nn.Module, seed: int = 0) -> dict:
    """Re-draw every parameter so position matters; returns the state dict.

    Matrices and tokens ~ N(0, 0.05^2) (pos_embed N(0, 0.5^2)), norm weights
    and layer scales ~ 1 + N(0, 0.1^2), biases N(0, 0.05^2); RoPE-Mixed
    frequencies keep timm's random init."""
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


def mmpos_from(converted: dict, rope_type: str, **overrides):
    """Backbone of :func:`infer_vit_config` (``out_type='raw'``) loaded
    strictly with the converted ``backbone.*`` tensors."""
    cfg = infer_vit_config(converted, None, rope_type)['backbone']
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
    base = timm.create_model(name, pretrained=False, num_classes=0, depth=2)
    state = redraw(base)
    rope_type = 'mixed' if 'mixed' in name else 'axial'
    ours = mmpos_from(convert_timm_vit(state), rope_type)
    no_rope = mmpos_from(convert_timm_vit(state), rope_type)
    for layer in no_rope.layers:
        layer.attn.rope = None
    torch.manual_seed(0)
    for size in SIZES:
        img = torch.randn(2, 3, *size)
        theirs = timm_at(name, state, size, depth=2)
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
                                     depth=2))
    grid = state['pos_embed']
    plain = timm.layers.resample_abs_pos_embed(grid, (18, 18), (14, 14), 0,
                                               antialias=False)
    aa = timm.layers.resample_abs_pos_embed(grid, (18, 18), (14, 14), 0,
                                            antialias=True)
    assert (plain - aa).abs().max() > 1e-2 * grid.abs().max()
