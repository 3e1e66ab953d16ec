"""2-D RoPE (Heo et al. 2024): formulas, relative-position property, caching,
autocast and gradients of :mod:`mmpos.models.layers.rope` / attention."""
import math

import pytest
import torch
import torch.nn.functional as F

from mmpos.models.layers import (RoPE2D, RoPEAttention, apply_rope,
                                 axial_frequencies, clear_rope_cache,
                                 grid_coords, mixed_frequencies,
                                 rope_cache_info, rope_tables,
                                 sincos_pos_embed_2d)

HEAD_DIM, HEADS = 16, 2


def eq13(head_dim, theta):
    """theta_t = theta ** (-t / (D/4)), t = 0 .. D/4 - 1 (paper Eq. 13)."""
    quarter = head_dim // 4
    return torch.tensor([theta**(-t / quarter) for t in range(quarter)],
                        dtype=torch.float64)


def logits(rope, q, k, coords):
    q, k = rope(torch.stack([q, k]), coords=coords)
    return q @ k.transpose(-1, -2)


def test_grid_coords_follow_patch_embed_token_order():
    coords = grid_coords(2, 3)
    assert coords.tolist() == [[0, 0], [1, 0], [2, 0], [0, 1], [1, 1], [2, 1]]
    # PatchEmbed flattens (B, C, h, w) row-major: token n is at (n % w, n // w)
    img = torch.arange(6.).reshape(1, 1, 2, 3)
    tokens = img.flatten(2).transpose(1, 2)[0, :, 0]
    assert torch.equal(tokens, coords[:, 1] * 3 + coords[:, 0])


def test_rotation_is_complex_multiplication():
    """Eq. 11: channels (2t, 2t+1) are one complex number, multiplied by
    e^{i a_t} with a_t = theta_x x + theta_y y (Eq. 14)."""
    x = torch.randn(2, 3, 5, HEAD_DIM, dtype=torch.float64)
    coords = torch.randn(5, 2, dtype=torch.float64) * 4
    freqs = torch.randn(2, 3, HEAD_DIM // 2, dtype=torch.float64)
    angle = coords[:, None, 0:1] * freqs[0] + coords[:, None, 1:] * freqs[1]
    angle = angle.transpose(0, 1)  # (heads, N, D/2)
    expected = torch.view_as_real(
        torch.view_as_complex(x.reshape(2, 3, 5, -1, 2)) *
        torch.polar(torch.ones_like(angle), angle)).flatten(-2)
    assert torch.allclose(apply_rope(x, *rope_tables(coords, freqs)),
                          expected)


def test_axial_angles_follow_eq12_eq13():
    coords = torch.tensor([[0.5, 2.0], [3.25, -1.0], [7.0, 4.5]],
                          dtype=torch.float64)
    rope = RoPE2D(HEAD_DIM, HEADS, 'axial').double()
    assert rope.theta == 100.0
    cos, sin = rope.tables(3, coords, dtype=torch.float64)
    theta = eq13(HEAD_DIM, 100.)
    angle = torch.cat(
        [coords[:, :1] * theta, coords[:, 1:] * theta], dim=-1)  # x- | y-pairs
    assert torch.allclose(cos[0, :, 0::2], angle.cos())
    assert torch.allclose(cos[0, :, 1::2], angle.cos())
    assert torch.allclose(sin[0, :, 0::2], -angle.sin())
    assert torch.allclose(sin[0, :, 1::2], angle.sin())


def test_default_thetas():
    assert RoPE2D(HEAD_DIM, HEADS, 'axial').theta == 100.0
    assert RoPE2D(HEAD_DIM, HEADS, 'mixed').theta == 10.0
    assert RoPE2D(HEAD_DIM, HEADS, 'mixed', theta=3.).theta == 3.0
    with pytest.raises(ValueError, match='divisible by 4'):
        RoPE2D(18, 1, 'axial')
    with pytest.raises(ValueError, match='rope_type'):
        RoPE2D(HEAD_DIM, 1, 'learned')


@pytest.mark.parametrize('rope_type', ['axial', 'mixed'])
@pytest.mark.parametrize('offset', [(3., -2.), (0.37, -1.5)])
@pytest.mark.parametrize('per_sample', [False, True])
def test_logits_depend_on_relative_positions_only(rope_type, offset,
                                                  per_sample):
    """Eq. 15: q'_n k'_m depends on p_n - p_m, so a common shift (integer or
    fractional) of all coordinates leaves every attention logit unchanged."""
    torch.manual_seed(0)
    rope = RoPE2D(HEAD_DIM, HEADS, rope_type).double()
    B, N = 2, 7
    q = torch.randn(B, HEADS, N, HEAD_DIM, dtype=torch.float64)
    k = torch.randn(B, HEADS, N, HEAD_DIM, dtype=torch.float64)
    shape = (B, N, 2) if per_sample else (N, 2)
    coords = torch.rand(shape, dtype=torch.float64) * 10
    shifted = coords + torch.tensor(offset, dtype=torch.float64)
    reference = logits(rope, q, k, coords)
    assert torch.allclose(reference, logits(rope, q, k, shifted), atol=1e-10)
    # ... while changing relative positions does change them
    assert not torch.allclose(reference, logits(rope, q, k, coords * 1.5),
                              atol=1e-3)


def test_mixed_with_zeroed_axis_equals_axial():
    """Eq. 14 with theta^y_t = 0 on the x-pairs (t < D/4) and theta^x_t = 0 on
    the y-pairs (t >= D/4), both set to Eq. 13, is exactly RoPE-Axial."""
    theta = eq13(HEAD_DIM, 100.).float()
    zero = torch.zeros_like(theta)
    freqs = torch.stack([torch.cat([theta, zero]),
                         torch.cat([zero, theta])])  # (2, D/2)
    axial = RoPE2D(HEAD_DIM, HEADS, 'axial')
    mixed = RoPE2D(HEAD_DIM, HEADS, 'mixed', theta=100.)
    with torch.no_grad():
        mixed.freqs.copy_(freqs[:, None].expand(2, HEADS, -1))
    qk = torch.randn(2, 2, HEADS, 1 + 12, HEAD_DIM)
    for coords in (torch.rand(2, 12, 2) * 8 - 2, grid_coords(3, 4)):
        assert torch.allclose(mixed(qk, coords=coords),
                              axial(qk, coords=coords), atol=1e-6)
    assert torch.allclose(mixed(qk, hw=(3, 4)), axial(qk, hw=(3, 4)),
                          atol=1e-6)
    # the paper's initialisation without random rotation is that point
    assert torch.equal(axial_frequencies(HEAD_DIM, 100.), freqs)
    assert torch.equal(
        mixed_frequencies(HEAD_DIM, HEADS, 100., rotate=False),
        freqs[:, None].expand(2, HEADS, -1))


def test_mixed_initialisation_rotates_axial_frequencies_per_head():
    """Init: per head one random angle phi; pair t gets m_t (cos, sin)(phi),
    pair t + D/4 the orthogonal m_t (-sin, cos)(phi), m_t from Eq. 13
    with theta = 10."""
    torch.manual_seed(0)
    freqs = RoPE2D(HEAD_DIM, 4, 'mixed').freqs.detach().double()
    assert freqs.shape == (2, 4, HEAD_DIM // 2)
    quarter = HEAD_DIM // 4
    first, second = freqs[..., :quarter], freqs[..., quarter:]
    mag = eq13(HEAD_DIM, 10.)
    assert torch.allclose(first.norm(dim=0), mag.expand(4, -1), atol=1e-6)
    assert torch.allclose(second.norm(dim=0), mag.expand(4, -1), atol=1e-6)
    assert torch.allclose((first * second).sum(0), torch.zeros_like(mag),
                          atol=1e-6)
    phi = torch.atan2(first[1], first[0])  # one angle per head
    assert torch.allclose(phi, phi[:, :1].expand_as(phi), atol=1e-5)
    assert phi[:, 0].unique().numel() == 4


def test_prefix_tokens_are_not_rotated():
    rope = RoPE2D(HEAD_DIM, HEADS, 'mixed')
    qk = torch.randn(2, 2, HEADS, 1 + 6, HEAD_DIM)
    coords = torch.rand(6, 2) * 5
    rotated = rope(qk, coords=coords)
    assert torch.equal(rotated[..., 0, :], qk[..., 0, :])
    assert torch.allclose(rotated[..., 1:, :], rope(qk[..., 1:, :], coords))
    with_grid = rope(qk, hw=(2, 3))
    assert torch.equal(with_grid[..., 0, :], qk[..., 0, :])
    assert torch.allclose(with_grid[..., 1:, :],
                          rope(qk[..., 1:, :], grid_coords(2, 3)))
    with pytest.raises(ValueError, match='8 positions given for only 7'):
        rope(qk, coords=torch.rand(8, 2))


def test_axial_grid_tables_are_cached():
    clear_rope_cache()
    rope = RoPE2D(HEAD_DIM, HEADS, 'axial')
    qk = torch.randn(2, 1, HEADS, 20, HEAD_DIM)
    first = rope(qk, hw=(4, 5))
    assert rope_cache_info()['axial'].misses == 1
    second = rope(qk, hw=(4, 5))
    info = rope_cache_info()['axial']
    assert (info.misses, info.hits, info.currsize) == (1, 1, 1)
    assert torch.equal(first, second)
    assert rope.tables(20, hw=(4, 5))[0] is rope.tables(20, hw=(4, 5))[0]
    # another layer with the same settings shares the table
    RoPE2D(HEAD_DIM, HEADS, 'axial')(qk, hw=(4, 5))
    assert rope_cache_info()['axial'].currsize == 1
    rope(torch.randn(2, 1, HEADS, 30, HEAD_DIM), hw=(5, 6))
    assert rope_cache_info()['axial'].currsize == 2


def test_mixed_caches_grid_but_recomputes_angles():
    clear_rope_cache()
    rope = RoPE2D(HEAD_DIM, HEADS, 'mixed')
    qk = torch.randn(2, 1, HEADS, 20, HEAD_DIM)
    before = rope(qk, hw=(4, 5))
    with torch.no_grad():
        rope.freqs.mul_(2)
    after = rope(qk, hw=(4, 5))
    info = rope_cache_info()
    assert (info['grid'].misses, info['grid'].hits) == (1, 1)
    assert info['axial'].currsize == 0
    assert not torch.allclose(before, after)


@pytest.mark.parametrize('rope_type', ['axial', 'mixed'])
def test_tables_cached_in_inference_mode_work_for_training(rope_type):
    clear_rope_cache()
    attn = RoPEAttention(32, HEADS, rope_type=rope_type)
    x = torch.randn(2, 1 + 12, 32)
    with torch.inference_mode():
        attn(x, hw=(3, 4))
    attn(x.requires_grad_(), hw=(3, 4)).sum().backward()
    assert x.grad is not None


def test_gradient_reaches_mixed_frequencies():
    rope = RoPE2D(4, 1, 'mixed').double()
    q, k = torch.randn(2, 1, 1, 5, 4, dtype=torch.float64).unbind(0)
    coords = torch.rand(5, 2, dtype=torch.float64) * 4

    def f(freqs):
        q_rot, k_rot = torch.func.functional_call(
            rope, {'freqs': freqs}, (torch.stack([q, k]), coords))
        return q_rot @ k_rot.transpose(-1, -2)

    freqs = rope.freqs.detach().clone().requires_grad_()
    assert torch.autograd.gradcheck(f, (freqs, ))

    attn = RoPEAttention(32, HEADS, rope_type='mixed')
    attn(torch.randn(2, 1 + 9, 32), hw=(3, 3)).pow(2).sum().backward()
    grad = attn.rope.freqs.grad
    assert grad is not None and grad.abs().sum() > 0


def test_attention_matches_manual_softmax():
    torch.manual_seed(0)
    attn = RoPEAttention(32, HEADS, rope_type='mixed').eval()
    x = torch.randn(2, 1 + 6, 32)
    coords = torch.rand(2, 6, 2) * 3
    qkv = attn.qkv(x).reshape(2, 7, 3, HEADS, 16).permute(2, 0, 3, 1, 4)
    q, k = attn.rope(qkv[:2], coords=coords)
    v = qkv[2]
    probs = (q @ k.transpose(-1, -2) / math.sqrt(16)).softmax(-1)
    expected = attn.proj((probs @ v).transpose(1, 2).reshape(2, 7, 32))
    assert torch.allclose(attn(x, coords=coords), expected, atol=1e-5)


def test_attention_without_rope_is_mmpretrain_attention():
    from mmpretrain.models.utils import MultiheadAttention
    ref = MultiheadAttention(32, HEADS, qkv_bias=False).eval()
    attn = RoPEAttention(32, HEADS, rope_type='none', qkv_bias=False).eval()
    attn.load_state_dict(ref.state_dict(), strict=True)
    x = torch.randn(2, 10, 32)
    assert torch.allclose(attn(x), ref(x), atol=1e-6)


@pytest.mark.parametrize('rope_type', ['axial', 'mixed'])
def test_autocast_and_low_precision(rope_type):
    torch.manual_seed(0)
    attn = RoPEAttention(32, HEADS, rope_type=rope_type)
    x = torch.randn(2, 1 + 16, 32)
    full = attn(x, hw=(4, 4))
    assert full.dtype == torch.float32
    with torch.autocast('cpu', dtype=torch.bfloat16):
        half = attn(x, hw=(4, 4))
    assert half.dtype == torch.bfloat16
    assert torch.allclose(half.float(), full, atol=5e-2, rtol=5e-2)
    qk = torch.randn(2, 1, HEADS, 16, 16, dtype=torch.bfloat16)
    assert attn.rope(qk, coords=torch.rand(16, 2) * 100).dtype == \
        torch.bfloat16


def test_sincos_embedding_follows_eq2():
    coords = torch.tensor([[2.0, 5.0], [0.5, 1.5]])
    emb = sincos_pos_embed_2d(coords, 8)  # C/4 = 2 frequencies
    omega = torch.tensor([1.0, 10000**-0.5])
    x, y = coords[:, :1] * omega, coords[:, 1:] * omega
    expected = torch.stack([x.sin(), x.cos(), y.sin(), y.cos()], -1)
    assert torch.allclose(emb, expected.flatten(-2))
    assert torch.allclose(sincos_pos_embed_2d(coords[None], 8)[0], emb)
    assert F.cosine_similarity(emb[0], emb[1], dim=0) < 1
