"""RoPE's runtime path (half-width complex phasors) against a real-valued
reference written here from the angles (Eq. 11) and against its exported
path (:meth:`~mmpos.models.layers.positions.RoPETable.export`, real cos /
sin tables), and ``torch.compile`` of a RoPE ViT: outputs equal to eager, no
graph break, recompiles across input sizes.

Tolerances: fp64 1e-12 and fp32 1e-5 absolute on unit-scale inputs (the
paths compute the same products in a different order); bf16 inputs: every
path rotates in fp32 and rounds once to bf16, so outputs differ by at most
one bf16 rounding step (``2 ** -8`` relative), checked as 1e-2 relative /
1e-2 absolute.
"""
import pytest
import torch
import torch._dynamo as dynamo

from mmpos.models.backbones import RoPEVisionTransformer
from mmpos.models.layers import RoPEAttention
from mmpos.models.layers.positions import (RoPETable, build_position_scheme,
                                           grid_coords)

TOL = {torch.float64: dict(atol=1e-12, rtol=0),
       torch.float32: dict(atol=1e-5, rtol=0),
       torch.bfloat16: dict(atol=1e-2, rtol=1e-2)}


def table(rope, x, coords=None, hw=None):
    """The scheme's block-0 table of ``coords`` / the ``hw`` grid, in fp32
    (fp64 for fp64 inputs ``x``)."""
    coords = grid_coords(*hw) if coords is None else coords
    coords = coords if coords.dim() == 3 else coords[None]
    dtype = torch.promote_types(x.dtype, torch.float32)
    return rope.block_table(0, coords.to(dtype))


def reference(x, table):
    """Eq. 11 with real tensors from the table's angles: pair ``(r, i)``
    (``(2t, 2t+1)`` or ``(t, t + D/2)``) -> ``(r cos - i sin, i cos + r
    sin)``; the leading tokens without position unchanged."""
    angles = table.phasors.angle()  # (n, heads | 1, M, D/2)
    y = x.to(angles.dtype)
    m = table.num_tokens
    if table.layout == 'pairs':
        r, i = y[..., 0::2], y[..., 1::2]
    else:
        r, i = y.chunk(2, dim=-1)
    r_m, i_m = r[..., -m:, :], i[..., -m:, :]
    cos, sin = angles.cos(), angles.sin()
    r = torch.cat((r[..., :-m, :], r_m * cos - i_m * sin), dim=-2)
    i = torch.cat((i[..., :-m, :], i_m * cos + r_m * sin), dim=-2)
    out = (torch.stack((r, i), -1).flatten(-2) if table.layout == 'pairs'
           else torch.cat((r, i), -1))
    return out.to(x.dtype)


def qk_view(batch=2, tokens=7, heads=2, dim=16, dtype=torch.float32):
    """``qkv[:2]`` of an attention layer: a strided view, as in
    :class:`RoPEAttention`."""
    qkv = torch.randn(batch, tokens, 3, heads, dim, dtype=torch.float64)
    return qkv.to(dtype).permute(2, 0, 3, 1, 4)[:2]


@pytest.mark.parametrize('dtype', [torch.float64, torch.float32,
                                   torch.bfloat16])
@pytest.mark.parametrize('layout', ['pairs', 'half'])
@pytest.mark.parametrize('rope_type', ['axial', 'mixed'])
def test_phasors_and_export_equal_the_reference(rope_type, layout, dtype):
    torch.manual_seed(0)
    rope = build_position_scheme(dict(type=rope_type, layout=layout), 16, 2,
                                 1)
    coords = torch.rand(2, 6, 2) * 9 - 3
    coords[0, 2] = float('nan')  # no position: not rotated
    for pos in (dict(coords=coords), dict(hw=(2, 3)),
                dict(coords=coords[0])):
        x = qk_view(dtype=dtype)
        rot = table(rope, x, **pos)
        out = rot.rotate(x)
        assert out.dtype == dtype
        torch.testing.assert_close(out, reference(x, rot), **TOL[dtype])
        torch.testing.assert_close(rot.export().rotate(x), out, **TOL[dtype])
    assert torch.equal(table(rope, x, coords).rotate(x)[:, 0, :, 3],
                       x[:, 0, :, 3])  # the NaN token (after 1 prefix)


@pytest.mark.parametrize('layout', ['pairs', 'half'])
@pytest.mark.parametrize('rope_type', ['axial', 'mixed'])
def test_phasor_gradients_equal_the_reference(rope_type, layout):
    torch.manual_seed(0)
    rope = build_position_scheme(dict(type=rope_type, layout=layout), 16, 2,
                                 1).double()
    coords = torch.rand(2, 6, 2, dtype=torch.float64) * 5
    qkv = qk_view(dtype=torch.float64)
    grads = []
    for rotate in (lambda t, x: t.rotate(x), lambda t, x: reference(x, t)):
        x = qkv.detach().requires_grad_()
        rotate(table(rope, x, coords), x).pow(3).sum().backward()
        grads.append((x.grad, rope.freqs[0].grad.clone()
                      if rope_type == 'mixed' else None))
        rope.zero_grad()
    torch.testing.assert_close(grads[0][0], grads[1][0], **TOL[torch.float64])
    if rope_type == 'mixed':  # learnable frequencies
        torch.testing.assert_close(grads[0][1], grads[1][1],
                                   **TOL[torch.float64])


def test_phasors_need_no_contiguous_input():
    torch.manual_seed(0)
    rope = RoPETable(torch.randn(1, 3, 5, 8, dtype=torch.float64))
    base = torch.randn(2, 3, 5, 17, dtype=torch.float64)
    for x in (base[..., :16], base[..., 1:]):  # odd offset / odd stride
        torch.testing.assert_close(rope.rotate(x), reference(x, rope),
                                   **TOL[torch.float64])


def test_rope_attention_with_exported_table_is_the_same():
    torch.manual_seed(0)
    layer = RoPEAttention(64, 4)
    rope = build_position_scheme(dict(type='mixed'), 16, 4, 1)
    x = torch.randn(2, 13, 64)
    live = rope.block_table(0, grid_coords(3, 4)[None])
    torch.testing.assert_close(layer(x, rope=live.export()),
                               layer(x, rope=live), **TOL[torch.float32])
    with pytest.raises(TypeError, match="impl"):  # one runtime path
        build_position_scheme(dict(type='axial', impl='eager'), 16, 1, 1)


def tiny_vit(rope_type):
    torch.manual_seed(0)
    return RoPEVisionTransformer(
        arch=dict(embed_dims=64, num_layers=2, num_heads=2,
                  feedforward_channels=128),
        img_size=32, patch_size=8, rope=dict(type=rope_type), use_ape=False)


@pytest.mark.parametrize('rope_type', ['axial', 'mixed'])
def test_compiled_backbone_has_no_graph_break(rope_type):
    """The whole backbone forward, RoPE attention included, is one graph
    (``torch._dynamo.explain``)."""
    dynamo.reset()
    explained = dynamo.explain(tiny_vit(rope_type))(torch.randn(2, 3, 32, 32))
    assert explained.graph_break_count == 0, explained.break_reasons
    assert explained.graph_count == 1


@pytest.mark.parametrize('rope_type', ['axial', 'mixed'])
def test_compiled_backbone_equals_eager_and_recompiles_once(rope_type):
    """``torch.compile`` (backend ``aot_eager``: AOTAutograd's traced
    forward and backward run by the eager kernels; inductor code
    generation takes ~40 s per model on a loaded 2-core CPU, too slow for
    the suite) matches eager in outputs and gradients. Across input sizes
    32, 48, 64 px it compiles twice: once for the first size, once with
    dynamic shapes at the second, which then serves the third."""
    model = tiny_vit(rope_type).train()
    dynamo.reset()
    compiles = []

    def counting(gm, example_inputs):
        compiles.append(gm)
        return torch._dynamo.backends.debugging.aot_eager(gm, example_inputs)

    compiled = torch.compile(model, backend=counting)
    for size in (32, 32, 48, 48, 64):
        x = torch.randn(2, 3, size, size)
        outs = []
        for run in (compiled, model):
            model.zero_grad()
            out = run(x)[-1]
            out.square().mean().backward()
            outs.append((out, [p.grad.clone() for p in model.parameters()]))
        torch.testing.assert_close(outs[0][0], outs[1][0],
                                   **TOL[torch.float32])
        for a, b in zip(outs[0][1], outs[1][1]):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
    assert len(compiles) == 2
