"""Paper-derived properties of the position schemes of
``mmpos.models.layers.rope_schemes`` (ComRoPE, LieRE, STRING, Spiral RoPE,
LookHere, test-time frequency scaling), checked against mmpos' RoPE2D
where a paper says a scheme reduces to RoPE-Axial / RoPE-Mixed."""
import math

import pytest
import torch

from mmpos.models.layers import RoPE2D, axial_frequencies, grid_coords
from mmpos.models.layers import rope_schemes as rs

D, HEADS, DEPTH = 16, 4, 2


def logits(table, q, k):
    """Patch-patch logits ``(B, heads, M, M)`` after the table's rotation."""
    return table.rotate(q) @ table.rotate(k).transpose(-1, -2)


def qk(batch=2, tokens=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, HEADS, tokens, D, generator=g),
            torch.randn(batch, HEADS, tokens, D, generator=g))


def learnable_schemes():
    """Schemes with parameters, each moved away from its initialisation
    where that is special (STRING's identity basis)."""
    torch.manual_seed(0)
    string = rs.STRINGRoPE(D, HEADS, DEPTH)
    with torch.no_grad():
        string.basis_raw.normal_(0, .3)
    return dict(string=string,
                comrope_ld=rs.ComRoPE(D, HEADS, DEPTH, 'ld', block_size=4),
                comrope_ap=rs.ComRoPE(D, HEADS, DEPTH, 'ap', block_size=4),
                liere=rs.LieRE(D, HEADS, DEPTH, block_size=4))


def commuting_schemes():
    return dict(spiral=rs.SpiralRoPE(D, HEADS, DEPTH, num_directions=4),
                **{k: v for k, v in learnable_schemes().items()
                   if k != 'liere'})


@pytest.mark.parametrize('name', sorted(commuting_schemes()))
def test_commuting_schemes_give_shift_invariant_logits(name):
    """Commuting generators: R(r_i)^T R(r_j) = R(r_j - r_i), so shifting
    every position by the same real vector leaves every logit unchanged
    (ComRoPE Thm. / STRING Thm. / RoPE Eq. 15)."""
    scheme = commuting_schemes()[name]
    coords = torch.rand(2, 12, 2) * 3
    q, k = qk()
    shift = torch.tensor([[[0.7, -1.3]]])
    for a, b in zip(scheme(coords), scheme(coords + shift)):
        ref = logits(a, q, k)
        assert torch.allclose(ref, logits(b, q, k), atol=2e-4, rtol=1e-4)
        # and it is not trivially position-free
        assert not torch.allclose(ref, q @ k.transpose(-1, -2), atol=1e-2)


def test_liere_generators_do_not_commute_so_logits_are_not_relative():
    """LieRE's generators are unconstrained (b > 2): a common shift changes
    the logits, unlike the commuting schemes."""
    scheme = rs.LieRE(D, HEADS, DEPTH, block_size=4)
    gen = rs.liere_generators(scheme.generators[0])
    ax, ay = gen[:, 0], gen[:, 1]
    assert (ax @ ay - ay @ ax).abs().max() > 1e-2
    coords = torch.rand(1, 12, 2)
    q, k = qk()
    a = scheme(coords)[0]
    b = scheme(coords + torch.tensor([[[0.5, 0.5]]]))[0]
    assert not torch.allclose(logits(a, q, k), logits(b, q, k), atol=1e-3)


@pytest.mark.parametrize('name', ['comrope_ld', 'comrope_ap', 'liere'])
def test_block_rotations_are_special_orthogonal(name):
    scheme = learnable_schemes()[name]
    coords = torch.randn(2, 7, 2) * 2
    for table in scheme(coords):
        r = table.rotations.double()
        eye = torch.eye(r.shape[-1], dtype=r.dtype)
        assert torch.allclose(r.transpose(-1, -2) @ r, eye.expand_as(r),
                              atol=1e-5)
        assert torch.allclose(torch.linalg.det(r), torch.ones((), dtype=torch.float64),
                              atol=1e-5)


def test_string_basis_is_special_orthogonal_and_rotations_keep_norms():
    scheme = learnable_schemes()['string']
    p = scheme.folded_basis().double()
    eye = torch.eye(D, dtype=p.dtype)
    assert torch.allclose(p.transpose(-1, -2) @ p, eye.expand_as(p),
                          atol=1e-5)
    assert torch.allclose(torch.linalg.det(p), torch.ones((), dtype=torch.float64),
                          atol=1e-5)
    assert not torch.allclose(p, eye.expand_as(p), atol=1e-2)
    q, _ = qk()
    for name, scheme in {**learnable_schemes(),
                         'spiral': rs.SpiralRoPE(D, HEADS, DEPTH)}.items():
        for table in scheme(torch.rand(2, 12, 2) * 4):
            assert torch.allclose(table.rotate(q).norm(dim=-1),
                                  q.norm(dim=-1), atol=1e-4), name


def rope_reference(freqs, coords, x):
    """mmpos' RoPE2D (pairs layout) with the given ``(2, heads, D/2)``
    frequencies at ``coords`` ``(B, M, 2)``."""
    rope = RoPE2D(D, HEADS, 'mixed')
    with torch.no_grad():
        rope.freqs.copy_(freqs)
    return rope(x, coords=coords)


def test_spiral_with_two_directions_is_rope_axial():
    assert torch.equal(rs.spiral_frequencies(D, 2, 100.),
                       axial_frequencies(D, 100.))
    coords = grid_coords(3, 5)[None]
    q, _ = qk(batch=1, tokens=15)
    table = rs.SpiralRoPE(D, HEADS, 1, num_directions=2)(coords)[0]
    axial = RoPE2D(D, HEADS, 'axial', 100.)
    assert torch.allclose(table.rotate(q), axial(q, coords=coords[0]),
                          atol=1e-5)


def test_spiral_directions_are_uniform_over_the_half_circle():
    freqs = rs.spiral_frequencies(32, 4, 100.)  # 4 groups of 4 pairs
    first = freqs[:, ::4]  # the highest frequency of each group
    angles = torch.atan2(first[1], first[0])
    assert torch.allclose(angles, torch.arange(4) * math.pi / 4, atol=1e-6)
    assert torch.allclose(freqs.norm(dim=0)[:4],
                          100.**(-torch.arange(4) / 4.), atol=1e-6)


def test_string_at_initialisation_is_rope_mixed():
    """S = 0 gives P = I: STRING starts as RoPE-Mixed with its frequencies
    (and stays RoPE-Mixed exactly as long as S = 0)."""
    scheme = rs.STRINGRoPE(D, HEADS, DEPTH)
    coords = torch.rand(2, 12, 2) * 5
    q, _ = qk()
    for i, table in enumerate(scheme(coords)):
        assert torch.allclose(table.basis, torch.eye(D).expand_as(table.basis))
        assert torch.allclose(table.rotate(q),
                              rope_reference(scheme.freqs[i], coords, q),
                              atol=1e-5)


def test_comrope_ld_with_2x2_blocks_is_rope_mixed():
    """b = 2: block j of axis a is s_aj (P_j - P_j^T), a rotation at the
    frequency s_aj (P_j - P_j^T)[1, 0] (RoPE-Mixed with head-shared
    directions)."""
    scheme = rs.ComRoPE(D, HEADS, 1, 'ld', block_size=2)
    coords = torch.rand(2, 12, 2) * 2
    q, _ = qk()
    rate = rs.skew(scheme.base[0])[..., 1, 0]  # (heads, D/2)
    freqs = scheme.scales[0][:, None, :] * rate[None]
    assert torch.allclose(scheme(coords)[0].rotate(q),
                          rope_reference(freqs, coords, q), atol=1e-5)


def test_comrope_ap_with_2x2_blocks_is_axial_style_rope():
    """b = 2: pair j rotates with axis j mod 2 only, at the learned rate
    (RoPE-Axial's structure with pairs alternating between the axes)."""
    scheme = rs.ComRoPE(D, HEADS, 1, 'ap', block_size=2)
    coords = torch.rand(2, 12, 2) * 2
    q, _ = qk()
    rate = rs.skew(scheme.base[0])[..., 1, 0]
    even = (torch.arange(D // 2) % 2 == 0).float()
    freqs = torch.stack((rate * even, rate * (1 - even)))
    assert torch.allclose(scheme(coords)[0].rotate(q),
                          rope_reference(freqs, coords, q), atol=1e-5)


def test_liere_with_2x2_blocks_is_rope_mixed():
    """2x2 skew generators always commute: LieRE-2 is RoPE-Mixed with the
    frequencies of the generators' (1, 0) entries."""
    scheme = rs.LieRE(D, HEADS, 1, block_size=2)
    coords = torch.rand(2, 12, 2)
    q, _ = qk()
    gen = rs.liere_generators(scheme.generators[0])  # (heads, 2, m, 2, 2)
    freqs = gen[..., 1, 0].permute(1, 0, 2)  # (2, heads, D/2)
    assert torch.allclose(scheme(coords)[0].rotate(q),
                          rope_reference(freqs, coords, q), atol=1e-5)


def test_nan_positions_are_not_rotated():
    coords = torch.rand(1, 12, 2)
    coords[0, 3] = math.nan
    q, _ = qk(batch=1)
    for name, scheme in commuting_schemes().items():
        if name == 'string':  # STRING's P applies to every token
            continue
        out = scheme(coords)[0].rotate(q)
        assert torch.allclose(out[..., 3, :], q[..., 3, :], atol=1e-6), name
        assert torch.isfinite(out).all()


@pytest.mark.parametrize('name', ['string', 'comrope_ld', 'comrope_ap',
                                  'liere'])
@pytest.mark.parametrize('grid', [(3, 5), (7, 2), (1, 1)])
def test_gradients_are_finite_for_any_grid(name, grid):
    scheme = learnable_schemes()[name]
    h, w = grid
    coords = torch.stack([grid_coords(h, w), grid_coords(h, w) + 0.5])
    q, k = qk(tokens=h * w)
    loss = sum(logits(t, q, k).square().mean() for t in scheme(coords))
    loss.backward()
    for pname, p in scheme.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), pname
        if h * w > 1:
            assert p.grad.abs().sum() > 0, pname


# ------------------------------------------------- frequency scaling
def test_ntk_scaling_of_axial_frequencies_is_a_base_change():
    """NTK-aware: theta -> theta s ** (n / (n - 1)) for n = D/4 pairs per
    axis: the highest frequency kept, the lowest divided by s."""
    s, n = 3., D // 4
    scaled, mscale = rs.scale_frequencies(axial_frequencies(D, 100.), s,
                                          'ntk')
    assert mscale == 1.
    assert torch.allclose(scaled,
                          axial_frequencies(D, 100. * s**(n / (n - 1))),
                          atol=1e-6)


def test_position_interpolation_equals_rope_at_shrunk_positions():
    freqs = axial_frequencies(D, 100.)
    coords = grid_coords(6, 6)[None]
    scaled, _ = rs.scale_frequencies(freqs, 2., 'pi')
    from mmpos.models.layers import rope_phasors
    assert torch.allclose(rope_phasors(coords, scaled),
                          rope_phasors(coords / 2, freqs), atol=1e-6)


def test_yarn_keeps_fast_pairs_interpolates_slow_ones_and_sets_temperature():
    freqs = axial_frequencies(32, 100.)  # magnitudes 1 .. 100 ** -7/8
    train, s = 14., 2.
    scaled, mscale = rs.scale_frequencies(freqs, s, 'yarn', train,
                                          alpha=1., beta=2.)
    turns = train * freqs.norm(dim=0) / (2 * math.pi)
    fast, slow = turns >= 2., turns <= 1.
    assert fast.any() and slow.any()
    assert torch.equal(scaled[:, fast], freqs[:, fast])
    assert torch.allclose(scaled[:, slow], freqs[:, slow] / s)
    assert mscale == pytest.approx(0.1 * math.log(2.) + 1.)
    assert rs.scale_frequencies(freqs, 1., 'yarn', train) == (freqs, 1.)


def test_scaling_applies_at_evaluation_beyond_the_training_grid_only():
    scheme = rs.SpiralRoPE(D, HEADS, 1, freq_scaling=dict(
        method='yarn', train_size=4))
    small, large = grid_coords(4, 4)[None], grid_coords(8, 8)[None]
    plain = rs.SpiralRoPE(D, HEADS, 1)
    q, _ = qk(batch=1, tokens=64)
    for coords in (small, large):  # training: never scaled
        assert torch.equal(scheme(coords)[0].phasors,
                           plain(coords)[0].phasors)
    scheme.eval()
    assert torch.equal(scheme(small)[0].phasors, plain(small)[0].phasors)
    table = scheme(large)[0]
    assert table.mscale == pytest.approx(0.1 * math.log(2.) + 1.)
    assert not torch.allclose(table.phasors, plain(large)[0].phasors)
    assert torch.allclose(table.rotate(q).norm(dim=-1),
                          q.norm(dim=-1) * table.mscale, atol=1e-4)
    with pytest.raises(ValueError, match="'pi' only"):
        rs.ComRoPE(D, HEADS, 1, freq_scaling=dict(method='ntk',
                                                 train_size=4))
    with pytest.raises(ValueError, match='frequency scaling must be'):
        rs.SpiralRoPE(D, HEADS, 1, freq_scaling=dict(method='linear',
                                                    train_size=4))


# ----------------------------------------------------------- LookHere
def brute_force_visible(direction, dx, dy):
    """LookHere's fields of view written out case by case (y grows down:
    'up' is towards row 0); the query's own position is inside."""
    half = dict(up=dy <= 0, down=dy >= 0, left=dx <= 0, right=dx >= 0)
    cone = dict(up=abs(dx) <= -dy, down=abs(dx) <= dy, left=abs(dy) <= -dx,
                right=abs(dy) <= dx)
    if direction in half:
        return half[direction]
    if direction.endswith('45'):
        a, b = direction[:-2].split('-')
        return cone[a] and half[b]
    a, b = direction.split('-')
    return half[a] and half[b]


@pytest.mark.parametrize('fov', [180, 90, 45])
def test_lookhere_bias_matches_its_definition(fov):
    h, w = 3, 4
    heads = 8
    coords = grid_coords(h, w)[None]
    dirs = rs.lookhere_directions(heads, fov)
    slopes = rs.lookhere_head_slopes(heads)
    assert slopes.tolist() == [.5] * 4 + [.25] * 4
    bias = rs.lookhere_bias(coords, dirs, slopes)[0]
    lowest = torch.finfo(torch.float32).min
    for head in range(heads):
        for i, (xi, yi) in enumerate(coords[0].tolist()):
            for j, (xj, yj) in enumerate(coords[0].tolist()):
                dx, dy = xj - xi, yj - yi
                if brute_force_visible(dirs[head], dx, dy):
                    want = -slopes[head].item() * math.hypot(dx, dy)
                    assert bias[head, i, j].item() == pytest.approx(want)
                else:
                    assert bias[head, i, j].item() == lowest
    # 180: each head sees a half plane, the four cover every key twice
    if fov == 180:
        seen = (bias[:4] > lowest).sum(0)
        assert seen.min() >= 2


def test_lookhere_scheme_per_block_slopes_shift_invariance_and_missing():
    scheme = rs.LookHere(D, HEADS, 3, fov=90, global_slope=2.,
                         layer_slopes=(1.5, .5))
    coords = grid_coords(4, 4)[None]
    tables = scheme(coords)
    assert [t.rotate(torch.ones(1)).item() for t in tables] == [1.] * 3
    first, last = tables[0].attn_bias, tables[-1].attn_bias
    visible = first > torch.finfo(torch.float32).min
    # block slopes 1.5 and 0.5 (times 2 globally) on the same masks
    assert torch.allclose(first[visible], 3 * last[visible])
    assert torch.equal(visible, last > torch.finfo(torch.float32).min)
    shifted = scheme(coords + torch.tensor([[[3.5, -2.]]]))
    for a, b in zip(tables, shifted):
        assert torch.allclose(a.attn_bias, b.attn_bias)
    coords = coords.clone()
    coords[0, 5] = math.nan
    bias = scheme(coords)[0].attn_bias
    assert (bias[..., 5, :] == 0).all() and (bias[..., :, 5] == 0).all()
    # softmax rows stay finite with the mask (the diagonal is visible)
    attn = torch.softmax(torch.randn(1, HEADS, 16, 16) + bias, -1)
    assert torch.isfinite(attn).all()
