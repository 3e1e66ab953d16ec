"""2-D RoPE (Heo et al. 2024): formulas, relative-position property, tables
once per forward, autocast and gradients of
:mod:`mmpos.models.layers.positions.linear` / attention."""
import math

import pytest
import torch
import torch.nn.functional as F

from mmpos.models.layers import RoPEAttention
from mmpos_positions import (RoPETable, grid_coords, mixed_frequencies,
                             rope_angles, sincos_pos_embed_2d)

from mmpos.models.layers.positions import build_position_scheme

HEAD_DIM, HEADS = 16, 2


def scheme(rope_type, head_dim=HEAD_DIM, heads=HEADS, depth=1, **cfg):
    """A RoPE scheme of ``depth`` blocks."""
    return build_position_scheme(dict(type=rope_type, **cfg), head_dim,
                                 heads, depth)


def table(rope, coords=None, hw=None, dtype=torch.float32, index=0):
    """Block ``index``'s table of ``coords`` (``(M, 2)`` / ``(B, M, 2)``)
    or of the ``hw`` grid."""
    coords = grid_coords(*hw) if coords is None else coords
    coords = coords if coords.dim() == 3 else coords[None]
    return rope.block_table(index, coords.to(dtype))


def rotate(rope, x, coords=None, hw=None):
    """``x`` ``(..., N, D)`` rotated by block 0's table, in fp32 (fp64 for
    fp64 inputs)."""
    dtype = torch.promote_types(x.dtype, torch.float32)
    return table(rope, coords, hw, dtype).rotate(x)


def eq13(head_dim, theta):
    """theta_t = theta ** (-t / (D/4)), t = 0 .. D/4 - 1 (paper Eq. 13)."""
    quarter = head_dim // 4
    return torch.tensor([theta**(-t / quarter) for t in range(quarter)],
                        dtype=torch.float64)


def logits(rope, q, k, coords):
    q, k = rotate(rope, torch.stack([q, k]), coords=coords)
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
    e^{i a_t} with a_t = theta_x x + theta_y y (Eq. 14); the exported real
    cos / sin path rotates the same."""
    x = torch.randn(2, 3, 5, HEAD_DIM, dtype=torch.float64)
    coords = torch.randn(5, 2, dtype=torch.float64) * 4
    freqs = torch.randn(2, 3, HEAD_DIM // 2, dtype=torch.float64)
    angle = coords[:, None, 0:1] * freqs[0] + coords[:, None, 1:] * freqs[1]
    angle = angle.transpose(0, 1)  # (heads, N, D/2)
    expected = torch.view_as_real(
        torch.view_as_complex(x.reshape(2, 3, 5, -1, 2)) *
        torch.polar(torch.ones_like(angle), angle)).flatten(-2)
    rope = RoPETable(rope_angles(coords[None], freqs))
    assert torch.allclose(rope.rotate(x), expected)
    assert torch.allclose(rope.export().rotate(x), expected)


def test_axial_angles_follow_eq12_eq13():
    coords = torch.tensor([[0.5, 2.0], [3.25, -1.0], [7.0, 4.5]],
                          dtype=torch.float64)
    rope = scheme('axial').double()
    assert rope.theta == 100.0
    exported = table(rope, coords, dtype=torch.float64).export()
    theta = eq13(HEAD_DIM, 100.)
    angle = torch.cat(
        [coords[:, :1] * theta, coords[:, 1:] * theta], dim=-1)  # x- | y-pairs
    assert torch.allclose(exported.cos[0, 0], angle.cos())  # (N, D/2)
    assert torch.allclose(exported.sin[0, 0], angle.sin())


def test_default_thetas():
    assert scheme('axial').theta == 100.0
    assert scheme('mixed').theta == 10.0
    assert scheme('mixed', theta=3.).theta == 3.0
    with pytest.raises(ValueError, match='divisible by 4'):
        scheme('axial', head_dim=18, heads=1)
    with pytest.raises(ValueError, match="'learned' is not a position scheme"):
        scheme('learned')


@pytest.mark.parametrize('rope_type', ['axial', 'mixed'])
@pytest.mark.parametrize('offset', [(3., -2.), (0.37, -1.5)])
@pytest.mark.parametrize('per_sample', [False, True])
def test_logits_depend_on_relative_positions_only(rope_type, offset,
                                                  per_sample):
    """Eq. 15: q'_n k'_m depends on p_n - p_m, so a common shift (integer or
    fractional) of all coordinates leaves every attention logit unchanged."""
    torch.manual_seed(0)
    rope = scheme(rope_type).double()
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
    axial = scheme('axial')
    mixed = scheme('mixed', theta=100.)
    with torch.no_grad():
        mixed.freqs[0].copy_(freqs[:, None].expand(2, HEADS, -1))
    qk = torch.randn(2, 2, HEADS, 1 + 12, HEAD_DIM)
    for coords in (torch.rand(2, 12, 2) * 8 - 2, grid_coords(3, 4)):
        assert torch.allclose(rotate(mixed, qk, coords=coords),
                              rotate(axial, qk, coords=coords), atol=1e-6)
    assert torch.allclose(rotate(mixed, qk, hw=(3, 4)),
                          rotate(axial, qk, hw=(3, 4)), atol=1e-6)
    # the paper's initialisation without random rotation is that point
    assert torch.equal(axial.freqs.float(), freqs)
    assert torch.equal(
        mixed_frequencies(HEAD_DIM, HEADS, 100., rotate=False),
        freqs[:, None].expand(2, HEADS, -1))


def test_mixed_initialisation_rotates_axial_frequencies_per_head():
    """Init: per head one random angle phi; pair t gets m_t (cos, sin)(phi),
    pair t + D/4 the orthogonal m_t (-sin, cos)(phi), m_t from Eq. 13
    with theta = 10."""
    torch.manual_seed(0)
    freqs = scheme('mixed', heads=4).freqs[0].detach().double()
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
    rope = scheme('mixed')
    qk = torch.randn(2, 2, HEADS, 1 + 6, HEAD_DIM)
    coords = torch.rand(6, 2) * 5
    rotated = rotate(rope, qk, coords=coords)
    assert torch.equal(rotated[..., 0, :], qk[..., 0, :])
    assert torch.allclose(rotated[..., 1:, :],
                          rotate(rope, qk[..., 1:, :], coords))
    with_grid = rotate(rope, qk, hw=(2, 3))
    assert torch.equal(with_grid[..., 0, :], qk[..., 0, :])
    assert torch.allclose(with_grid[..., 1:, :],
                          rotate(rope, qk[..., 1:, :], grid_coords(2, 3)))
    with pytest.raises(ValueError, match='8 positions given for only 7'):
        rotate(rope, qk, coords=torch.rand(8, 2))


@pytest.mark.parametrize('rope_type,calls', [('axial', 1), ('mixed', 3)])
def test_tables_are_computed_once_per_forward(rope_type, calls,
                                              monkeypatch):
    """The backbone asks its position scheme once per forward: one table
    for all blocks with RoPE-Axial's shared frequencies, one per block with
    RoPE-Mixed's, none inside the blocks."""
    from mmpos.models.backbones import RoPEVisionTransformer
    model = RoPEVisionTransformer(
        arch=dict(embed_dims=32, num_layers=3, num_heads=HEADS,
                  feedforward_channels=64), img_size=32, patch_size=8,
        rope=dict(type=rope_type))
    seen = []
    original = type(model.rope).block_table
    monkeypatch.setattr(type(model.rope), 'block_table',
                        lambda self, i, c, hw=None: seen.append(i) or
                        original(self, i, c, hw))
    model(torch.randn(2, 3, 32, 40))
    assert len(seen) == calls
    model(torch.randn(2, 3, 32, 40))
    assert len(seen) == 2 * calls


def test_gradient_reaches_mixed_frequencies():
    rope = scheme('mixed', head_dim=4, heads=1).double()
    q, k = torch.randn(2, 1, 1, 5, 4, dtype=torch.float64).unbind(0)
    coords = torch.rand(1, 5, 2, dtype=torch.float64) * 4

    def f(freqs):
        tables = torch.func.functional_call(
            rope, {'freqs.0': freqs}, (coords, None, 1))
        q_rot, k_rot = tables[0].rotate(torch.stack([q, k]))
        return q_rot @ k_rot.transpose(-1, -2)

    freqs = rope.freqs[0].detach().clone().requires_grad_()
    assert torch.autograd.gradcheck(f, (freqs, ))

    attn, rope = RoPEAttention(32, HEADS), scheme('mixed')
    attn(torch.randn(2, 1 + 9, 32), rope=table(rope, hw=(3, 3)),
         hw=(3, 3)).pow(2).sum().backward()
    grad = rope.freqs[0].grad
    assert grad is not None and grad.abs().sum() > 0


def test_attention_matches_manual_softmax():
    torch.manual_seed(0)
    attn, rope = RoPEAttention(32, HEADS).eval(), scheme('mixed')
    x = torch.randn(2, 1 + 6, 32)
    coords = torch.rand(2, 6, 2) * 3
    qkv = attn.qkv(x).reshape(2, 7, 3, HEADS, 16).permute(2, 0, 3, 1, 4)
    q, k = rotate(rope, qkv[:2], coords=coords)
    v = qkv[2]
    probs = (q @ k.transpose(-1, -2) / math.sqrt(16)).softmax(-1)
    expected = attn.proj((probs @ v).transpose(1, 2).reshape(2, 7, 32))
    assert torch.allclose(attn(x, rope=table(rope, coords)), expected,
                          atol=1e-5)


def test_attention_without_rope_is_mmpretrain_attention():
    from mmpretrain.models.utils import MultiheadAttention
    ref = MultiheadAttention(32, HEADS, qkv_bias=False).eval()
    attn = RoPEAttention(32, HEADS, qkv_bias=False).eval()
    attn.load_state_dict(ref.state_dict(), strict=True)
    x = torch.randn(2, 10, 32)
    assert torch.allclose(attn(x), ref(x), atol=1e-6)


@pytest.mark.parametrize('rope_type', ['axial', 'mixed'])
def test_autocast_and_low_precision(rope_type):
    torch.manual_seed(0)
    attn, rope = RoPEAttention(32, HEADS), scheme(rope_type)
    x = torch.randn(2, 1 + 16, 32)
    full = attn(x, rope=table(rope, hw=(4, 4)))
    assert full.dtype == torch.float32
    with torch.autocast('cpu', dtype=torch.bfloat16):
        half = attn(x, rope=table(rope, hw=(4, 4)))
    assert half.dtype == torch.bfloat16
    assert torch.allclose(half.float(), full, atol=5e-2, rtol=5e-2)
    qk = torch.randn(2, 1, HEADS, 16, 16, dtype=torch.bfloat16)
    assert rotate(rope, qk, coords=torch.rand(16, 2) * 100).dtype == \
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
