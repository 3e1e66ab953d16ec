"""Paper-derived properties of the position schemes of
``mmpos_positions`` (ComRoPE, LieRE, STRING, Spiral RoPE, Golden Gate
RoPE, LookHere, test-time frequency scaling), checked against mmpos'
RoPE-Axial / RoPE-Mixed where a paper says a scheme reduces to one of them
and against a reference's definition written out in the test."""
import math

import pytest
import torch

import numpy as np
from scipy.special import erfinv

from mmpos_positions import (AxialRoPE, ComRoPE, GoldenGateRoPE, LieRE,
                             LookHere, MixedRoPE, RoPETable, SpiralRoPE,
                             STRINGRoPE, golden_gate_frequencies, grid_coords,
                             lookhere_bias, rope_angles, scale_frequencies,
                             spiral_frequencies)
from mmpos_positions.linear import BasisRoPETable, upper_skew
from mmpos_positions.matrix import (BlockRotationTable, block_rotations,
                                    exp_at_points)

from mmpos.registry import POSITION_ENCODINGS

D, HEADS, DEPTH = 16, 4, 2


def tables(scheme, coords):
    """Every block's table for the same ``(n, M, 2)`` coordinates (the
    position interface's ``tables``)."""
    return scheme.tables(coords)


def axial_frequencies(head_dim, theta=100.):
    """RoPE-Axial's ``(2, D/2)`` frequencies (Eq. 12/13)."""
    return AxialRoPE(head_dim, 1, 1, theta=theta).freqs.float()


def skew(raw):
    return raw - raw.transpose(-1, -2)


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
    string = STRINGRoPE(D, HEADS, DEPTH)
    with torch.no_grad():
        for basis in string.basis:
            basis.normal_(0, .3)
    return dict(string=string,
                comrope_ld=ComRoPE(D, HEADS, DEPTH, 'ld', block_size=4),
                comrope_ap=ComRoPE(D, HEADS, DEPTH, 'ap', block_size=4),
                liere=LieRE(D, HEADS, DEPTH, block_size=4))


def commuting_schemes():
    return dict(spiral=SpiralRoPE(D, HEADS, DEPTH, num_directions=4),
                golden_gate=GoldenGateRoPE(D, HEADS, DEPTH,
                                           zero_fraction=.25),
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
    for a, b in zip(tables(scheme, coords), tables(scheme, coords + shift)):
        ref = logits(a, q, k)
        assert torch.allclose(ref, logits(b, q, k), atol=2e-4, rtol=1e-4)
        # and it is not trivially position-free
        assert not torch.allclose(ref, q @ k.transpose(-1, -2), atol=1e-2)


def test_liere_generators_do_not_commute_so_logits_are_not_relative():
    """LieRE's generators are unconstrained (b > 2): a common shift changes
    the logits, unlike the commuting schemes."""
    scheme = LieRE(D, HEADS, DEPTH, block_size=4)
    gen = scheme.generators(0)
    ax, ay = gen[:, 0], gen[:, 1]
    assert (ax @ ay - ay @ ax).abs().max() > 1e-2
    coords = torch.rand(1, 12, 2)
    q, k = qk()
    a = scheme.block_table(0, coords)
    b = scheme.block_table(0, coords + torch.tensor([[[0.5, 0.5]]]))
    assert not torch.allclose(logits(a, q, k), logits(b, q, k), atol=1e-3)


def test_liere_block_rotations_are_special_orthogonal():
    scheme = learnable_schemes()['liere']
    coords = torch.randn(2, 7, 2) * 2
    for table in tables(scheme, coords):
        r = table.rotations.double()
        eye = torch.eye(r.shape[-1], dtype=r.dtype)
        # fp32 matrix exponentials of generators with entries up to 2 pi
        assert torch.allclose(r.transpose(-1, -2) @ r, eye.expand_as(r),
                              atol=1e-4)
        assert torch.allclose(torch.linalg.det(r),
                              torch.ones((), dtype=r.dtype), atol=1e-4)


@pytest.mark.parametrize('dtype,tol', [(torch.float32, 2e-5),
                                       (torch.float64, 1e-11)])
def test_liere_exponentials_are_torch_matrix_exp(dtype, tol):
    """LieRE's per-token exponentials (:func:`exp_at_points`: Taylor terms
    shared by the tokens, squarings per token) against ``torch.matrix_exp``
    per token (the peer) at the initial scale of LieRE's code (8 x 8
    blocks, entries U[0, 2 pi), a 14 x 14 grid spanning [0, 1]: 1-norms up
    to about 70, several squarings), with tokens at the origin, NaN and
    negative coordinates: values, and the gradients of a random linear
    loss, against fp64 ``matrix_exp`` within ``tol`` (fp32: as close as
    fp32 ``matrix_exp`` itself)."""
    torch.manual_seed(0)
    raw = torch.rand(3, 2, 2, 8, 8, dtype=torch.float64) * 2 * math.pi
    coords = torch.cat([grid_coords(14, 14, dtype=torch.float64) / 13,
                        torch.tensor([[0., 0.], [math.nan, math.nan],
                                      [-0.7, 0.4]], dtype=torch.float64)])
    coords = coords[None]  # (1, 199, 2)
    weight = torch.randn(1, 3, 199, 2, 8, 8, dtype=torch.float64)

    def run(fn, precision):
        leaf = raw.to(precision).detach().requires_grad_()
        out = fn(coords.to(precision), upper_skew(leaf))
        (out.double() * weight).sum().backward()
        return out.double(), leaf.grad.double()

    def per_token(xy, gen):
        xy = xy.nan_to_num(0.)
        return torch.matrix_exp(
            xy[:, None, :, 0, None, None, None] * gen[:, 0, None] +
            xy[:, None, :, 1, None, None, None] * gen[:, 1, None])

    exact, exact_grad = run(per_token, torch.float64)
    ours, grad = run(block_rotations, dtype)
    assert (ours - exact).abs().max() < tol
    assert (grad - exact_grad).abs().max() < tol * exact_grad.abs().max()
    if dtype == torch.float32:  # no worse than the peer in fp32
        peer, _ = run(per_token, dtype)
        assert (ours - exact).abs().max() <= 2 * (peer - exact).abs().max()
    # the origin and the NaN token: the identity
    eye = torch.eye(8, dtype=torch.float64).expand(3, 2, 2, 8, 8)
    assert torch.allclose(ours[0, :, 196:198], eye, atol=tol)


@pytest.mark.parametrize('n,shape', [
    (1, (2, 3, HEADS, 14, D)),  # shared coordinates, q and k stacked
    (3, (2, 3, HEADS, 14, D)),  # per-sample coordinates
    (2, (6, HEADS, 12, D)),     # 2 windows' table, 3 images of 2 windows
    (1, (3, HEADS, 12, D)),     # no prefix tokens
])
def test_block_rotation_table_is_the_per_token_product(n, shape):
    """LieRE's rotation (the queries and keys of the batch as the columns
    of one batched product) equals ``R_t x_t`` per token and block
    (``einsum``), prefix tokens unchanged, values and gradients (fp64), for
    non-contiguous input (the attention's view of the qkv projection)."""
    torch.manual_seed(0)
    gen = skew(torch.randn(HEADS, 2, D // 8, 8, 8, dtype=torch.float64))
    gen.requires_grad_()
    coords = torch.rand(n, 12, 2, dtype=torch.float64)
    table = BlockRotationTable(block_rotations(coords, gen))
    x = torch.randn(*shape[:-2], shape[-1], shape[-2], dtype=torch.float64)
    x = x.transpose(-1, -2).requires_grad_()  # (..., N, D), not contiguous
    prefix = shape[-2] - 12
    rot = table.rotations  # (n, heads, M, m, b, b)
    xs = x[..., prefix:, :].unflatten(-1, (-1, 8))
    xs = xs.reshape(-1, n, *xs.shape[-4:])  # windows: batch-major
    ref = torch.einsum('nhtmij,lnhtmj->lnhtmi', rot, xs)
    ref = torch.cat((x[..., :prefix, :],
                     ref.reshape(*shape[:-2], 12, D)), -2)
    weight = torch.randn(shape, dtype=torch.float64)
    expected = torch.autograd.grad((ref * weight).sum(), (x, gen),
                                   retain_graph=True)
    out = table.rotate(x)
    assert torch.allclose(out, ref, atol=1e-12)
    grads = torch.autograd.grad((out * weight).sum(), (x, gen))
    for ours, peer in zip(grads, expected):
        assert torch.allclose(ours, peer, atol=1e-11)


def test_compiled_exponentials_equal_eager_values_and_gradients():
    """While compiling, the squarings are a static loop of masked steps
    (forward and the adjoint's doubling): values and gradients equal the
    eager ones, which square exactly as often as needed (fp64)."""
    torch.manual_seed(0)
    raw = torch.rand(2, 2, 2, 8, 8, dtype=torch.float64) * 2 * math.pi
    coords = grid_coords(5, 4, dtype=torch.float64)[None] / 4
    weight = torch.randn(1, 2, 20, 2, 8, 8, dtype=torch.float64)

    def loss(fn):
        leaf = raw.detach().requires_grad_()
        out = fn(coords, upper_skew(leaf))
        (out * weight).sum().backward()
        return out, leaf.grad

    torch._dynamo.reset()
    compiled = torch.compile(block_rotations, fullgraph=True,
                             backend='eager')
    (eager, eager_grad), (ours, grad) = loss(block_rotations), loss(compiled)
    assert torch.allclose(ours, eager, atol=1e-12)
    assert torch.allclose(grad, eager_grad, rtol=1e-10, atol=1e-10)


def test_exp_at_points_without_squaring_is_the_taylor_series():
    """Small generators need no squaring: the shared-term polynomial
    alone equals ``matrix_exp``; zero generators give the identity."""
    torch.manual_seed(1)
    gen = torch.randn(2, 3, 4, 4, dtype=torch.float64) * 0.1
    points = torch.rand(5, 2, dtype=torch.float64)
    exact = torch.matrix_exp(points[:, 0, None, None, None] * gen[0] +
                             points[:, 1, None, None, None] * gen[1])
    assert torch.allclose(exp_at_points(points, gen), exact, atol=1e-14)
    assert torch.equal(exp_at_points(points, torch.zeros_like(gen)),
                       torch.eye(4, dtype=torch.float64).expand(5, 3, 4, 4))


@pytest.mark.parametrize('variant', ['ld', 'ap'])
def test_comrope_eigenbasis_table_gives_the_exponentials_logits(variant):
    """ComRoPE's table, RoPE(r) O^T from one eigendecomposition per block
    (O^T on every token), gives the logits of exp(x A_x + y A_y) per token
    (prefix and NaN tokens: identity) between all tokens, values and
    gradients (fp64, random loss), without the exponentials; its rotated
    vectors are R(r) x turned by the orthogonal O^T."""
    torch.manual_seed(0)
    scheme = ComRoPE(D, HEADS, 1, variant, block_size=4,
                     position_scale=0.5).double()
    coords = torch.rand(2, 12, 2, dtype=torch.float64) * 6 - 3
    coords[1, 4] = math.nan
    # 2 prefix tokens
    q, k = (torch.randn(2, HEADS, 14, D, dtype=torch.float64)
            for _ in range(2))
    weight = torch.randn(2, HEADS, 14, 14, dtype=torch.float64)
    exact = BlockRotationTable(block_rotations(coords * 0.5,
                                               scheme.generators(0)))
    fast = scheme.block_table(0, coords)
    assert isinstance(fast, BasisRoPETable)
    results = []
    for table in (fast, exact):
        scheme.zero_grad()
        out = table.rotate(q) @ table.rotate(k).transpose(-1, -2)
        (out * weight).square().sum().backward()
        results.append((out, [p.grad.clone() for p in scheme.parameters()]))
    (ours, grads), (ref, ref_grads) = results
    assert torch.allclose(ours, ref, atol=1e-10)
    assert torch.allclose(ref[..., :2, :2], q[..., :2, :] @ k[..., :2, :].mT,
                          atol=1e-12)
    for g, r in zip(grads, ref_grads):
        assert torch.allclose(g, r, rtol=1e-8, atol=1e-8)
    with torch.no_grad():  # the vectors: R(r) x = O (RoPE(r) O^T x)
        basis = fast.basis  # O^T, block-diagonal (heads, D, D)
        assert torch.allclose(fast.rotate(q) @ basis, exact.rotate(q),
                              atol=1e-10)


def test_comrope_falls_back_to_exponentials_where_rates_meet():
    """S = 0 (every rate 0): the eigenbasis is undefined, the per-token
    exponentials (here the identity) take over."""
    scheme = ComRoPE(D, HEADS, 1, 'ld', block_size=4)
    with torch.no_grad():
        base = scheme.base[0]
        base.copy_(base + base.transpose(-1, -2))  # symmetric: S = 0
    table = scheme.block_table(0, torch.rand(1, 12, 2))
    assert isinstance(table, BlockRotationTable)
    q, _ = qk()
    assert torch.allclose(table.rotate(q), q, atol=1e-6)


def test_string_basis_is_special_orthogonal_and_rotations_keep_norms():
    scheme = learnable_schemes()['string']
    p = torch.stack([scheme.folded_basis(i) for i in range(DEPTH)]).double()
    eye = torch.eye(D, dtype=p.dtype)
    assert torch.allclose(p.transpose(-1, -2) @ p, eye.expand_as(p),
                          atol=1e-5)
    assert torch.allclose(torch.linalg.det(p),
                          torch.ones((), dtype=torch.float64),
                          atol=1e-5)
    assert not torch.allclose(p, eye.expand_as(p), atol=1e-2)
    q, _ = qk()
    for name, scheme in {**learnable_schemes(),
                         'spiral': SpiralRoPE(D, HEADS, DEPTH),
                         'golden_gate': GoldenGateRoPE(D, HEADS,
                                                       DEPTH)}.items():
        for table in tables(scheme, torch.rand(2, 12, 2) * 4):
            assert torch.allclose(table.rotate(q).norm(dim=-1),
                                  q.norm(dim=-1), atol=1e-4), name


def rope_reference(freqs, coords, x):
    """mmpos' RoPE-Mixed (pairs layout) with the given ``(2, heads, D/2)``
    frequencies at ``coords`` ``(B, M, 2)``."""
    rope = MixedRoPE(D, HEADS, 1)
    with torch.no_grad():
        rope.freqs[0].copy_(freqs)
    return rope.block_table(0, coords).rotate(x)


def test_spiral_with_two_directions_is_rope_axial():
    assert torch.equal(spiral_frequencies(D, 2, 100.),
                       axial_frequencies(D, 100.))
    coords = grid_coords(3, 5)[None]
    q, _ = qk(batch=1, tokens=15)
    table = SpiralRoPE(D, HEADS, 1, num_directions=2).block_table(0,
                                                                     coords)
    axial = AxialRoPE(D, HEADS, 1, theta=100.).block_table(0, coords)
    assert torch.allclose(table.rotate(q), axial.rotate(q), atol=1e-5)


def test_spiral_directions_are_uniform_over_the_half_circle():
    freqs = spiral_frequencies(32, 4, 100.)  # 4 groups of 4 pairs
    first = freqs[:, ::4]  # the highest frequency of each group
    angles = torch.atan2(first[1], first[0])
    assert torch.allclose(angles, torch.arange(4) * math.pi / 4, atol=1e-6)
    assert torch.allclose(freqs.norm(dim=0)[:4],
                          100.**(-torch.arange(4) / 4.), atol=1e-6)


def golden_gate_reference(head_dim, heads, min_freq, max_freq, zeros):
    """Golden Gate RoPE's ``(heads, F, 2)`` frequency vectors as its
    reference defines them (jerryxio.ng/posts/nd-rope), in numpy: the
    generalised golden ratio of 2-D (the real root of x^3 = x + 1), the
    R-sequence of heads x F points, its normal quantiles normalised, times
    ``zeros`` zeros then geometric magnitudes."""
    g = max(r.real for r in np.roots([1, 0, -1, -1]) if abs(r.imag) < 1e-12)
    pairs = head_dim // 2
    i = np.arange(1, heads * pairs + 1)[:, None]
    z = np.mod(i * g**-np.arange(1, 3.), 1.)
    u = erfinv(2 * z - 1)
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    mag = np.concatenate((np.zeros(zeros), np.geomspace(
        min_freq, max_freq, pairs - zeros)))
    return u.reshape(heads, pairs, 2) * mag[:, None]


def test_golden_gate_frequencies_follow_the_reference_definition():
    want = golden_gate_reference(32, 6, .05, 3., 4)  # (heads, F, (row, col))
    got = golden_gate_frequencies(32, 6, .05, 3., zero_fraction=.25)
    assert got.shape == (2, 6, 16)
    assert np.allclose(got[0].numpy(), want[..., 1], atol=1e-6)  # x: col
    assert np.allclose(got[1].numpy(), want[..., 0], atol=1e-6)  # y: row
    # every pair of every head its own direction, spread over the circle
    angles = torch.atan2(got[1], got[0])[:, 4:].flatten()
    assert len(set(angles.tolist())) == angles.numel()
    assert angles.max() - angles.min() > 1.9 * math.pi


def test_golden_gate_rotates_as_the_reference():
    """The reference's rotation: ``theta = sum_p w u_p pos_p`` per pair,
    ``(x cos - y sin, x sin + y cos)`` on the two halves of each head, at
    positions ``(row, col)``; the zero pairs never turn."""
    scheme = GoldenGateRoPE(D, HEADS, 1, min_freq=.1, max_freq=2.,
                            zero_fraction=.25)
    coords = grid_coords(3, 4)[None]  # (1, 12, (x, y))
    q, _ = qk(batch=1, tokens=12)
    got = scheme.block_table(0, coords).rotate(q)
    freqs = torch.from_numpy(golden_gate_reference(D, HEADS, .1, 2., 2))
    pos = coords.flip(-1).double()  # (row, col)
    theta = torch.einsum('hfp,bnp->bhnf', freqs, pos)
    x, y = q.double().chunk(2, dim=-1)
    want = torch.cat((x * theta.cos() - y * theta.sin(),
                      x * theta.sin() + y * theta.cos()), dim=-1)
    assert torch.allclose(got.double(), want, atol=1e-5)
    for half in (slice(0, 2), slice(D // 2, D // 2 + 2)):  # 2 zero pairs
        assert torch.equal(got[..., half], q[..., half])


def test_string_at_initialisation_is_rope_mixed():
    """S = 0 gives P = I: STRING starts as RoPE-Mixed with its frequencies
    (and stays RoPE-Mixed exactly as long as S = 0)."""
    scheme = STRINGRoPE(D, HEADS, DEPTH)
    coords = torch.rand(2, 12, 2) * 5
    q, _ = qk()
    for i, table in enumerate(tables(scheme, coords)):
        assert torch.allclose(table.basis, torch.eye(D).expand_as(table.basis))
        assert torch.allclose(table.rotate(q),
                              rope_reference(scheme.freqs[i], coords, q),
                              atol=1e-5)


def test_comrope_ld_with_2x2_blocks_is_rope_mixed():
    """b = 2: block j of axis a is s_aj (P_j - P_j^T), a rotation at the
    frequency s_aj (P_j - P_j^T)[1, 0] (RoPE-Mixed with head-shared
    directions)."""
    scheme = ComRoPE(D, HEADS, 1, 'ld', block_size=2)
    coords = torch.rand(2, 12, 2) * 2
    q, k = qk()
    rate = skew(scheme.base[0])[..., 1, 0]  # (heads, D/2)
    freqs = scheme.scales[0][:, None, :] * rate[None]
    assert torch.allclose(logits(scheme.block_table(0, coords), q, k),
                          rope_reference(freqs, coords, q) @
                          rope_reference(freqs, coords, k).mT, atol=1e-4)


def test_comrope_ap_with_2x2_blocks_is_axial_style_rope():
    """b = 2: pair j rotates with axis j mod 2 only, at the learned rate
    (RoPE-Axial's structure with pairs alternating between the axes)."""
    scheme = ComRoPE(D, HEADS, 1, 'ap', block_size=2)
    coords = torch.rand(2, 12, 2) * 2
    q, k = qk()
    rate = skew(scheme.base[0])[..., 1, 0]
    even = (torch.arange(D // 2) % 2 == 0).float()
    freqs = torch.stack((rate * even, rate * (1 - even)))
    assert torch.allclose(logits(scheme.block_table(0, coords), q, k),
                          rope_reference(freqs, coords, q) @
                          rope_reference(freqs, coords, k).mT, atol=1e-4)


def test_liere_with_2x2_blocks_is_rope_mixed():
    """2x2 skew generators always commute: LieRE-2 is RoPE-Mixed with the
    frequencies of the generators' (1, 0) entries."""
    scheme = LieRE(D, HEADS, 1, block_size=2)
    coords = torch.rand(2, 12, 2)
    q, _ = qk()
    gen = scheme.generators(0)  # (heads, 2, m, 2, 2)
    freqs = gen[..., 1, 0].permute(1, 0, 2)  # (2, heads, D/2)
    assert torch.allclose(scheme.block_table(0, coords).rotate(q),
                          rope_reference(freqs, coords, q), atol=1e-5)


def test_nan_positions_are_not_rotated():
    coords = torch.rand(1, 12, 2)
    coords[0, 3] = math.nan
    q, _ = qk(batch=1)
    for name, scheme in commuting_schemes().items():
        if name in ('string', 'comrope_ld', 'comrope_ap'):
            continue  # an orthogonal basis applies to every token
        out = scheme.block_table(0, coords).rotate(q)
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
    loss = sum(logits(t, q, k).square().mean()
               for t in tables(scheme, coords))
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
    scaled = scale_frequencies(axial_frequencies(D, 100.), s, 'ntk')
    assert torch.allclose(scaled,
                          axial_frequencies(D, 100. * s**(n / (n - 1))),
                          atol=1e-6)


def test_position_interpolation_equals_rope_at_shrunk_positions():
    freqs = axial_frequencies(D, 100.)
    coords = grid_coords(6, 6)[None]
    scaled = scale_frequencies(freqs, 2., 'pi')
    assert torch.allclose(rope_angles(coords, scaled),
                          rope_angles(coords / 2, freqs), atol=1e-6)


def test_yarn_keeps_fast_pairs_and_interpolates_slow_ones():
    freqs = axial_frequencies(32, 100.)  # magnitudes 1 .. 100 ** -7/8
    train, s = 14., 2.
    scaled = scale_frequencies(freqs, s, 'yarn', train, alpha=1., beta=2.)
    turns = train * freqs.norm(dim=0) / (2 * math.pi)
    fast, slow = turns >= 2., turns <= 1.
    assert fast.any() and slow.any()
    assert torch.equal(scaled[:, fast], freqs[:, fast])
    assert torch.allclose(scaled[:, slow], freqs[:, slow] / s)
    assert scale_frequencies(freqs, 1., 'yarn', train) is freqs
    with pytest.raises(ValueError, match='train_extent'):
        scale_frequencies(freqs, 2., 'yarn')


LINEAR = [dict(type='axial'), dict(type='mixed'), dict(type='spiral'),
          dict(type='string'), dict(type='golden_gate')]


def build(cfg, **kwargs):
    return POSITION_ENCODINGS.build(
        dict(cfg, head_dim=D, num_heads=HEADS, depth=DEPTH, **kwargs))


@pytest.mark.parametrize('cfg', LINEAR)
def test_freq_scaling_rescales_in_eval_on_larger_grids_only(cfg):
    """``freq_scaling``: a 2x larger grid in eval mode rotates as the
    scheme with its frequencies rescaled; the training grid, smaller grids
    and training mode are unchanged; the parameters are never touched."""
    torch.manual_seed(0)
    plain = build(cfg).eval()
    torch.manual_seed(0)
    scaled = build(cfg, freq_scaling=dict(method='ntk', train_grid=4)).eval()
    assert scaled.freq_scaling.temperature is False
    q, _ = qk(batch=1, tokens=65)  # a class token and an 8 x 8 grid
    grid8, grid4 = grid_coords(8, 8)[None], grid_coords(4, 4)[None]
    rot = [t.rotate(q) for t in scaled.tables(grid8, (8, 8))]
    same = [t.rotate(q) for t in plain.tables(grid8, (8, 8))]
    for r, p in zip(rot, same):
        assert not torch.allclose(r, p, atol=1e-3)
        assert torch.equal(r[..., 0, :], q[..., 0, :])  # class token
    # the reference: the plain scheme with its frequencies rescaled
    with torch.no_grad():
        for t in (plain.freqs if isinstance(plain.freqs, torch.nn.ParameterList)
                  else [plain.freqs]):
            t.copy_(scale_frequencies(t, 2., 'ntk'))
    want = [t.rotate(q) for t in plain.tables(grid8, (8, 8))]
    for r, w in zip(rot, want):
        assert torch.allclose(r, w, atol=1e-6)
    torch.manual_seed(0)
    plain = build(cfg).eval()
    q4 = q[..., :17, :]
    for hw, scheme_mode in (((4, 4), 'eval'), ((3, 4), 'eval'),
                            ((4, 4), 'train')):
        for scheme in (plain, scaled):
            scheme.train(scheme_mode == 'train')
        got = [t.rotate(q4) for t in scaled.tables(grid4, hw)]
        ref = [t.rotate(q4) for t in plain.tables(grid4, hw)]
        assert all(torch.equal(g, r) for g, r in zip(got, ref))
    assert all(torch.equal(a, b) for a, b in zip(
        scaled.state_dict().values(), plain.state_dict().values()))


def test_ntk_scaled_axial_table_is_the_axial_table_of_the_new_base():
    s, n = 2., D // 4
    coords = grid_coords(8, 8)[None]
    q, _ = qk(batch=1, tokens=64)
    scheme = AxialRoPE(D, HEADS, 1, theta=100.,
                       freq_scaling=dict(method='ntk', train_grid=4)).eval()
    got = scheme.tables(coords, (8, 8))[0].rotate(q)
    want = AxialRoPE(D, HEADS, 1, theta=100. * s**(n / (n - 1))).block_table(
        0, coords).rotate(q)
    assert torch.allclose(got, want, atol=1e-5)


def test_yarn_temperature_scales_every_query_and_key():
    """YaRN: ``sqrt(1/t) = 0.1 ln s + 1`` on queries and keys (class token
    included), so every logit grows by ``1/t``; the export table keeps
    it."""
    coords = grid_coords(6, 6)[None]
    q, k = qk(batch=1, tokens=37)
    yarn = dict(method='yarn', train_grid=(3, 2))  # s = max(2, 3) = 3
    hot = AxialRoPE(D, HEADS, 1, freq_scaling=yarn).eval()
    cold = AxialRoPE(D, HEADS, 1,
                     freq_scaling=dict(yarn, temperature=False)).eval()
    t_hot = hot.tables(coords, (6, 6))[0]
    t_cold = cold.tables(coords, (6, 6))[0]
    factor = (0.1 * math.log(3.) + 1)**2
    assert math.isclose(t_hot.magnitude**2, factor)
    want = t_cold.rotate(q) @ t_cold.rotate(k).transpose(-1, -2) * factor
    for table in (t_hot, t_hot.export()):
        got = table.rotate(q) @ table.rotate(k).transpose(-1, -2)
        assert torch.allclose(got, want, atol=1e-4)


def test_freq_scaling_refuses_what_it_cannot_scale():
    with pytest.raises(ValueError, match='train_grid'):
        AxialRoPE(D, HEADS, 1, freq_scaling=dict(method='yarn'))
    with pytest.raises(ValueError, match='method'):
        AxialRoPE(D, HEADS, 1, freq_scaling=dict(method='linear',
                                                 train_grid=4))
    with pytest.raises(ValueError, match='patch coordinate frame'):
        build(dict(type='dinov3'),
              freq_scaling=dict(method='ntk', train_grid=14))
    with pytest.raises(TypeError, match='freq_scaling'):
        build(dict(type='comrope'),
              freq_scaling=dict(method='ntk', train_grid=14))


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
    scheme = LookHere(D, heads, 1, fov=fov)
    dirs, slopes = scheme.directions, scheme.slopes[0]
    assert slopes.tolist() == [.5] * 4 + [.25] * 4
    bias = lookhere_bias(coords, dirs, slopes)[0]
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
    scheme = LookHere(D, HEADS, 3, fov=90, global_slope=2.,
                         layer_slopes=(1.5, .5))
    coords = grid_coords(4, 4)[None]
    blocks = scheme.tables(coords)  # one bias computation, 3 slopes
    assert [t.attn_bias for t in blocks[:1]][0].shape == (1, HEADS, 16, 16)
    for i, t in enumerate(blocks):
        assert torch.equal(t.attn_bias,
                           scheme.block_table(i, coords).attn_bias)
    q, _ = qk(batch=1, tokens=17)  # a class token and 16 patches
    # no rotation: the queries themselves, not a copy
    assert all(t.rotate(q) is q for t in blocks)
    with pytest.raises(ValueError, match='16 positions given for only 15'):
        blocks[0].rotate(q[..., 2:, :])
    first, last = blocks[0].attn_bias, blocks[-1].attn_bias
    visible = first > torch.finfo(torch.float32).min
    # block slopes 1.5 and 0.5 (times 2 globally) on the same masks
    assert torch.allclose(first[visible], 3 * last[visible])
    assert torch.equal(visible, last > torch.finfo(torch.float32).min)
    shifted = scheme.tables(coords + torch.tensor([[[3.5, -2.]]]))
    for a, b in zip(blocks, shifted):
        assert torch.allclose(a.attn_bias, b.attn_bias)
    coords = coords.clone()
    coords[0, 5] = math.nan
    bias = scheme.block_table(0, coords).attn_bias
    assert (bias[..., 5, :] == 0).all() and (bias[..., :, 5] == 0).all()
    # softmax rows stay finite with the mask (the diagonal is visible)
    attn = torch.softmax(torch.randn(1, HEADS, 16, 16) + bias, -1)
    assert torch.isfinite(attn).all()


def test_string_folds_into_the_query_key_projections():
    """fold_: P in the qkv weights and a plain RoPE-Mixed scheme (no flag)
    in STRING's place, equal tokens (class token included); the folded
    state dict loads into a STRING model (its missing basis: P = I) with
    equal tokens."""
    from mmpos.models.backbones import RoPEVisionTransformer
    torch.manual_seed(0)
    arch = dict(embed_dims=32, num_layers=2, num_heads=2,
                feedforward_channels=64)
    model = RoPEVisionTransformer(arch=arch, img_size=32, patch_size=8,
                                  rope=dict(type='string'),
                                  out_type='raw').eval()
    with torch.no_grad():
        for basis in model.rope.basis:
            basis.normal_(0, .3)
    img = torch.randn(2, 3, 32, 48)
    with torch.no_grad():
        expected = model(img)[0]
        string = model.rope
        model.rope = string.fold_([layer.attn.qkv for layer in model.layers])
        assert type(model.rope) is MixedRoPE
        assert not any(basis.any() for basis in string.basis)
        assert all(isinstance(t, RoPETable) for t in model.rope(None, (4, 6)))
        folded = model(img)[0]
        unfolded = RoPEVisionTransformer(arch=arch, img_size=32, patch_size=8,
                                         rope=dict(type='string'),
                                         out_type='raw').eval()
        missing = unfolded.load_state_dict(model.state_dict(),
                                           strict=False).missing_keys
        assert missing == ['rope.basis.0', 'rope.basis.1']
        assert torch.allclose(folded, expected, atol=1e-5)
        assert torch.allclose(unfolded(img)[0], expected, atol=1e-5)
    with pytest.raises(ValueError, match='qkv projection of each of its 2'):
        string.fold_([model.layers[0].attn.qkv])
