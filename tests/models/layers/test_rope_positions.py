"""Position options of the RoPE layer and RoPEVisionTransformer: DINOv3's
period parametrisation, rotate-half layout, normalised coordinate frames,
train-time coordinate augmentation and register tokens (parity with timm's
full models is in test_timm_parity.py)."""
import math

import pytest
import torch

import mmpos  # noqa: F401
from mmpos.models.backbones import RoPEVisionTransformer
from mmpos_positions import (AxialRoPE, PatchCoords, RoPETable, frame_coords,
                             frequency_magnitudes, grid_coords, rope_angles)

from mmpos.models.layers.positions import build_position_scheme

TINY = dict(embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64)
DINOV3 = dict(type='axial', periods=dict(base=100.), axes='yx',
              layout='half')


def tiny(**kwargs):
    torch.manual_seed(0)
    model = RoPEVisionTransformer(arch=TINY, patch_size=8, img_size=32,
                                  **kwargs)
    model.init_weights()
    return model.eval()


def test_period_parametrisation_is_dinov3s():
    """base: period_t = base ** (2t / (D/2)) (DINOv3's _init_weights), i.e.
    2 pi times RoPE-ViT's theta frequencies; min/max: geometric, both ends
    included."""
    base = frequency_magnitudes(64, periods=dict(base=100.))
    assert torch.allclose(base, 2 * math.pi * frequency_magnitudes(64, 100.))
    periods = 2 * math.pi / frequency_magnitudes(
        64, periods=dict(min_period=0.5, max_period=40.))
    assert periods[0].item() == pytest.approx(0.5)
    assert periods[-1].item() == pytest.approx(40.)
    ratios = periods[1:] / periods[:-1]
    assert torch.allclose(ratios, ratios[0].expand_as(ratios))
    with pytest.raises(ValueError, match='either theta or periods'):
        frequency_magnitudes(64, 100., dict(base=100.))
    with pytest.raises(ValueError, match='either theta or periods'):
        build_position_scheme(dict(type='axial', theta=10.,
                                   periods=dict(base=100.)), 64, 2, 1)


def test_yx_axes_swap_the_rows():
    xy = AxialRoPE(16, 1, 1).freqs
    assert torch.equal(AxialRoPE(16, 1, 1, axes='yx').freqs, xy.flip(0))


def test_rotate_half_is_pairs_up_to_a_channel_permutation():
    """Pair t is channels (2t, 2t+1) in 'pairs' and (t, t + D/2) in 'half':
    rotating the permuted vector gives the permuted rotation."""
    D = 16
    perm = torch.arange(D).reshape(D // 2, 2).t().flatten()  # half <- pairs
    x = torch.randn(2, 3, 10, D, dtype=torch.float64)
    coords = torch.randn(10, 2, dtype=torch.float64) * 3
    freqs = torch.randn(2, 3, D // 2, dtype=torch.float64)
    angles = rope_angles(coords[None], freqs)  # (1, heads, N, D/2)
    pairs = RoPETable(angles, 'pairs').rotate(x)
    half = RoPETable(angles, 'half').rotate(x[..., perm])
    assert torch.allclose(half, pairs[..., perm])
    # a rotation: norms of every pair are kept
    assert torch.allclose(half.norm(dim=-1), x.norm(dim=-1))


@pytest.mark.parametrize('frame', ['separate', 'max', 'min'])
def test_normalised_frames_are_dinov3s_patch_centres(frame):
    timm_layers = pytest.importorskip('timm.layers.pos_embed_sincos')
    for h, w in [(4, 4), (3, 7)]:
        ours = frame_coords(grid_coords(h, w), (h, w), frame)
        theirs = timm_layers.make_coords_dinov3(
            h, w, normalize_coords=frame, grid_indexing='xy')
        assert torch.allclose(ours, theirs, atol=1e-6)
    assert torch.equal(frame_coords(grid_coords(2, 3), (2, 3), 'patch'),
                       grid_coords(2, 3))


def test_augmentation_is_per_sample_training_only_and_seeded():
    pos = PatchCoords('separate', shift=0.2, jitter=1.5, rescale=2.)
    grid = grid_coords(4, 6)
    base = frame_coords(grid, (4, 6), 'separate')
    pos.eval()
    assert torch.equal(pos(grid[None], (4, 6), 3, 1)[0], base)
    pos.train()
    torch.manual_seed(0)
    out = pos(grid[None], (4, 6), 3, 1)  # one draw for every block
    assert out.shape == (3, 24, 2)
    assert not torch.allclose(out[0], out[1])
    # every sample is one affine map of the grid: x' = a x + b per axis
    for b in range(3):
        for axis in range(2):
            fit = torch.linalg.lstsq(
                torch.stack((base[:, axis], torch.ones(24)), 1),
                out[b, :, axis:axis + 1]).solution
            a = fit[0].item()
            assert 1 / 3 - 1e-6 <= abs(a) <= 3 + 1e-6  # jitter x rescale
            assert torch.allclose(
                base[:, axis] * fit[0] + fit[1], out[b, :, axis], atol=1e-5)
    torch.manual_seed(0)
    assert torch.equal(pos(grid[None], (4, 6), 3, 1), out)
    with pytest.raises(ValueError, match='needs the patch grid'):
        pos(grid[None], None, 1, 1)
    with pytest.raises(ValueError, match='jitter'):
        PatchCoords(jitter=0.5)


def test_backbone_augmentation_uses_the_global_rng_state():
    """The draws come from torch's generator, so restoring its state (what
    RNGStateHook does on resume) replays them exactly."""
    model = tiny(rope=dict(DINOV3, coords=dict(frame='separate', shift=0.1,
                                               jitter=1.2, rescale=2.)))
    model.train()
    img = torch.randn(2, 3, 32, 48)
    state = torch.get_rng_state()
    first = model(img)[0]
    second = model(img)[0]
    torch.set_rng_state(state)
    assert torch.equal(model(img)[0], first)
    assert not torch.allclose(first, second)
    model.eval()
    assert torch.equal(model(img)[0], model(img)[0])


def test_explicit_coords_follow_the_frame():
    """forward_tokens with patch-unit coordinates of the full grid gives
    forward's result in a normalised frame too (the map is affine)."""
    model = tiny(rope=dict(DINOV3, coords=dict(frame='max')), out_type='raw')
    img = torch.randn(2, 3, 24, 40)
    tokens, hw = model.embed(img)
    with torch.no_grad():
        full = model(img)[0]
        explicit = model.forward_tokens(tokens, coords=grid_coords(*hw),
                                        hw=hw)[0]
    assert torch.allclose(full, explicit, atol=1e-6)


def test_register_tokens():
    plain = tiny()
    assert 'register_tokens' not in plain.state_dict()
    model = tiny(num_register_tokens=3, out_type='featmap', use_ape=True)
    assert model.register_tokens.shape == (1, 3, 32)
    assert model.pos_embed.shape == (1, 1 + 16, 32)  # registers get no APE
    assert model.get_layer_depth('register_tokens') == (0, 4)
    img = torch.randn(2, 3, 32, 40)
    with torch.no_grad():
        featmap = model(img)[0]
        model.out_type = 'raw'
        raw = model(img)[0]
    assert raw.shape == (2, 1 + 3 + 20, 32)
    assert torch.equal(featmap.flatten(2).transpose(1, 2), raw[:, 4:])
    # registers change what the patches see
    with torch.no_grad():
        model.register_tokens.normal_()
        assert not torch.allclose(model(img)[0][:, 4:], raw[:, 4:])


def _dinov3_reference_forward(model, img, shift, jitter, rescale):
    """A re-implementation, from DINOv3's description (Simeoni et al. 2025,
    RoPE with coordinate augmentation; its ``DinoVisionTransformer`` asks
    its RoPE module for fresh sin/cos inside the block loop), of a
    training-mode forward: for every block, one draw for the whole batch of
    a shift ``U[-s, s]`` per axis, a jitter ``exp(U[-log J, log J])`` per
    axis and a rescale ``exp(U[-log R, log R])``, in that order, applied to
    the patch centres normalised to [-1, 1] as (row, col); angles
    ``2 pi coord / period``, periods ``100 ** (t / (D/4))``; rotate-half
    channels, the class token unrotated. The blocks' weights are the
    model's."""
    x, (h, w) = model.embed(img)
    x = torch.cat((model.cls_token.expand(x.shape[0], -1, -1), x), dim=1)
    rows = (torch.arange(h) + 0.5) / h * 2 - 1
    cols = (torch.arange(w) + 0.5) / w * 2 - 1
    centres = torch.stack(torch.meshgrid(rows, cols, indexing='ij'),
                          -1).reshape(-1, 2)  # (h * w, 2) as (row, col)
    heads = model.layers[0].attn.num_heads
    dim = model.embed_dims // heads
    periods = 100.**(torch.arange(dim // 4) / (dim // 4))
    for layer in model.layers:
        coords = centres + torch.empty(2).uniform_(-shift, shift)
        coords = coords * torch.empty(2).uniform_(
            -math.log(jitter), math.log(jitter)).exp()
        coords = coords * torch.empty(1).uniform_(
            -math.log(rescale), math.log(rescale)).exp()
        angles = (2 * math.pi * coords[:, :, None] / periods).flatten(1)
        cos, sin = angles.cos().repeat(1, 2), angles.sin().repeat(1, 2)

        def rope(t):  # (B, heads, 1 + h * w, D); the class token stays
            cls, patches = t[..., :1, :], t[..., 1:, :]
            first, second = patches.chunk(2, dim=-1)
            turned = torch.cat((-second, first), dim=-1)
            return torch.cat((cls, patches * cos + turned * sin), dim=-2)

        attn = layer.attn
        y = layer.ln1(x)
        q, k, v = attn.qkv(y).reshape(*y.shape[:2], 3, heads, dim).permute(
            2, 0, 3, 1, 4)
        out = torch.nn.functional.scaled_dot_product_attention(
            rope(q), rope(k), v)
        x = x + attn.proj(out.transpose(1, 2).flatten(2))
        x = layer.ffn(layer.ln2(x), identity=x)
    return model.ln1(x)


def test_dinov3_preset_draws_per_block_per_batch_as_dinov3():
    """rope=dict(type='dinov3') in training: a 3-block model with a fixed
    seed equals the re-implementation of DINOv3's per-block, per-batch draw;
    timm's once-per-forward draw (draw='per_forward') and per-sample draws
    (per='sample') give other numbers."""
    aug = dict(shift=0.1, jitter=1.3, rescale=2.)
    arch = dict(embed_dims=32, num_layers=3, num_heads=2,
                feedforward_channels=64)

    def model_with(**coords):
        torch.manual_seed(0)
        model = RoPEVisionTransformer(
            arch=arch, patch_size=8, img_size=32, out_type='raw',
            rope=dict(type='dinov3', coords=dict(aug, **coords)))
        model.init_weights()
        return model.train()

    model = model_with()
    assert (model.rope.coords.draw, model.rope.coords.per) == ('per_block',
                                                                'batch')
    img = torch.randn(2, 3, 24, 40)
    with torch.no_grad():
        torch.manual_seed(1)
        ours = model(img)[0]
        torch.manual_seed(1)
        reference = _dinov3_reference_forward(model, img, **aug)
        torch.testing.assert_close(ours, reference, rtol=1e-5, atol=1e-5)
        for other in (dict(draw='per_forward'), dict(per='sample')):
            torch.manual_seed(1)
            moved = model_with(**other)(img)[0]
            assert not torch.allclose(moved, reference, atol=1e-3), other
