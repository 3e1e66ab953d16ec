"""PaPE and PaPE-RI (``mmpos_positions.pape``): equal to the authors'
attention layer on identical weights and inputs (a stored reference, see
``data/make_pape_reference.py`` for the commit and the command), and the
paper's properties: translation invariance, rotation invariance of PaPE-RI,
distance decay, context awareness, no bias for prefix tokens and tokens
without position, windows, and one clear error where an attention layer
does not bind the tokens."""
from pathlib import Path

import pytest
import torch

from mmpos_positions import PaPE, PaPERI, TokenTable, grid_coords
from mmpos_positions.pape import parabola_bias

from mmpos.models.layers import RoPEAttention

REFERENCE = Path(__file__).parent / 'data' / 'pape_reference.pt'
CLASSES = dict(pape=PaPE, pape_ri=PaPERI)


def load_reference(name):
    return torch.load(REFERENCE, weights_only=True)[name]


def ours_from_reference(name, ref):
    """RoPEAttention and a one-block scheme holding the authors' weights
    (their ``qkv_proj`` / ``out_proj`` are ours ``qkv`` / ``proj``)."""
    state = ref['state']
    width = state['qkv_proj.weight'].shape[1]  # 2 heads (the generator's)
    attn = RoPEAttention(width, 2).eval()
    attn.qkv.weight.data.copy_(state['qkv_proj.weight'])
    attn.qkv.bias.data.copy_(state['qkv_proj.bias'])
    attn.proj.weight.data.copy_(state['out_proj.weight'])
    attn.proj.bias.data.copy_(state['out_proj.bias'])
    if name == 'pape':
        rows = state['position_encoder.position.weight'].shape[0]
        scheme = PaPE(width // 2, 2, 1, parabolas=rows // 2)
        scheme.position[0].data.copy_(
            state['position_encoder.position.weight'])
        scheme.content[0].data.copy_(state['position_encoder.ab.weight'])
    else:
        scheme = PaPERI(width // 2, 2, 1)
        scheme.scales.copy_(
            state['position_encoder.position_scales'].reshape(1, -1))
        scheme.content[0].data.copy_(state['position_encoder.a.weight'])
    return attn, scheme


@pytest.mark.parametrize('name', ['pape', 'pape_ri'])
def test_equal_to_the_authors_attention_layer(name):
    """The authors' ``Attention`` (extra query / key channels) and ours
    (an additive bias) on the same weights, tokens and positions: equal to
    2e-6 (fp32; measured max |diff| 3.6e-7 and 6e-8). Without the
    positions the output moves by more than 1e-2, so the test sees the
    parabolas."""
    ref = load_reference(name)
    attn, scheme = ours_from_reference(name, ref)
    with torch.no_grad():
        table = scheme(ref['positions'], None, 2)[0]
        ours = attn(ref['x'], rope=table)
        plain = attn(ref['x'])
    torch.testing.assert_close(ours, ref['output'], atol=2e-6, rtol=0)
    assert (plain - ref['output']).abs().max() > 1e-2


def direct_bias(scheme, coords, x):
    """The bias from the paper's formula term by term (no expansion):
    ``sum_p -a_ip (u_ip - u_jp)^2 + b_ip (u_ip - u_jp)``, over sqrt(D)."""
    heads, dim = scheme.num_heads, scheme.head_dim
    w = scheme.content[0].double()
    feats = x.double() @ w.t()  # (B, M, k heads P)
    if isinstance(scheme, PaPE):
        u = coords.double() @ scheme.position[0].double().t()  # (M, h P)
        u = u.unflatten(-1, (heads, -1))  # (M, h, P)
        ab = feats.unflatten(-1, (2, heads, -1))
        a, b = torch.nn.functional.softplus(ab[:, :, 0]), ab[:, :, 1]
    else:
        u = coords.double()[:, None, :] * scheme.scales[0].double()[:,
                                                                    None]
        a = torch.nn.functional.softplus(feats)[..., None].expand(
            -1, -1, -1, 2)
        b = torch.zeros_like(a)
    diff = u[:, None] - u[None, :]  # (M_q, M_k, h, P)
    bias = (-a[:, :, None] * diff.square() + b[:, :, None] * diff).sum(-1)
    return bias.permute(0, 3, 1, 2) / dim**0.5  # (B, h, M, M)


@pytest.mark.parametrize('name', ['pape', 'pape_ri'])
def test_bias_is_the_papers_formula_and_is_relative(name):
    """The expanded bias equals the term-by-term formula; translating all
    positions leaves it unchanged; PaPE-RI's is also unchanged by a
    rotation; prefix tokens get no bias."""
    torch.manual_seed(0)
    scheme = CLASSES[name](8, 2, 1)
    coords = grid_coords(3, 4) * 1.3
    x = torch.randn(2, 1 + 12, 16)
    bias = scheme(coords, None)[0].bind(x).attn_bias
    assert bias.shape == (2, 2, 12, 12)
    torch.testing.assert_close(bias.double(),
                               direct_bias(scheme, coords, x[:, 1:]),
                               atol=1e-4, rtol=1e-5)
    shifted = scheme(coords + torch.tensor([5.5, -3.]), None)[0].bind(x)
    torch.testing.assert_close(shifted.attn_bias, bias, atol=1e-5,
                               rtol=1e-5)
    if name == 'pape_ri':
        c, s = torch.cos(torch.tensor(.7)), torch.sin(torch.tensor(.7))
        rot = torch.stack((torch.stack((c, -s)), torch.stack((s, c))))
        turned = scheme(coords @ rot.t(), None)[0].bind(x)
        torch.testing.assert_close(turned.attn_bias, bias, atol=1e-5,
                                   rtol=1e-5)
        # distance decay: the bias falls with the distance (a > 0)
        row = bias[:, :, 0, :4]  # keys (0..3, 0) from the query at 0
        assert (row[..., 1:] < row[..., :-1]).all()


def test_context_awareness_and_no_position_tokens():
    """The bias depends on the query token's content (not the key's); a
    token without position (NaN) gets none, to or from it."""
    torch.manual_seed(0)
    scheme = PaPE(8, 2, 1, parabolas=3)
    coords = grid_coords(2, 3)
    x = torch.randn(1, 6, 16)
    table = scheme(coords, None)[0]
    bias = table.bind(x).attn_bias
    y = x.clone()
    y[0, 2] += 1.
    moved = table.bind(y).attn_bias
    assert not torch.allclose(moved[:, :, 2], bias[:, :, 2])
    torch.testing.assert_close(moved[:, :, [0, 1, 3, 4, 5]],
                               bias[:, :, [0, 1, 3, 4, 5]])
    missing = coords.clone()
    missing[4] = float('nan')
    gap = scheme(missing, None)[0].bind(x).attn_bias
    assert torch.isfinite(gap).all()
    assert (gap[:, :, 4] == 0).all() and (gap[:, :, :, 4] == 0).all()
    keep = [0, 1, 2, 3, 5]
    torch.testing.assert_close(gap[:, :, keep][..., keep],
                               bias[:, :, keep][..., keep])


@pytest.mark.parametrize('name', ['pape', 'pape_ri'])
def test_window_tables_serve_every_image_of_the_batch(name):
    """A table of ``nW`` windows bound to ``B nW`` window batches: window
    ``w`` of every image uses window ``w``'s positions."""
    torch.manual_seed(0)
    scheme = CLASSES[name](8, 2, 1)
    coords = torch.randn(3, 4, 2) * 3  # 3 windows of 4 tokens
    x = torch.randn(2 * 3, 4, 16)
    bias = scheme(coords, None)[0].bind(x).attn_bias
    for w in range(3):
        one = scheme(coords[w], None)[0].bind(x[w::3]).attn_bias
        torch.testing.assert_close(bias[w::3], one)


def test_unbound_tables_refuse_to_rotate_in_one_line():
    """An attention layer that does not bind the tokens gets one clear
    error, not a model without positions."""
    table = PaPE(8, 2, 1)(grid_coords(2, 2), None)[0]
    assert isinstance(table, TokenTable)
    with pytest.raises(TypeError, match='must call table.bind'):
        table.rotate(torch.randn(2, 1, 2, 4, 8))


def test_parabola_bias_matches_the_difference_form():
    g = torch.Generator().manual_seed(0)
    u = torch.randn(2, 3, 5, 4, generator=g, dtype=torch.float64)
    a = torch.rand(2, 3, 5, 4, generator=g, dtype=torch.float64)
    b = torch.randn(2, 3, 5, 4, generator=g, dtype=torch.float64)
    diff = u[:, :, :, None] - u[:, :, None]  # (n, h, M_q, M_k, P)
    expected = (-a[:, :, :, None] * diff.square() +
                b[:, :, :, None] * diff).sum(-1)
    torch.testing.assert_close(parabola_bias(u, a, b), expected)


def test_bad_options_are_one_line():
    with pytest.raises(ValueError, match='parabolas must be a positive'):
        PaPE(8, 2, 1, parabolas=0)
