"""The fast RoPE path (half-width complex phasors, ``impl='fast'``) against
the eager reference (full-width real tables, ``impl='eager'``), and
``torch.compile`` of a RoPE ViT: outputs equal to eager, no graph break,
recompiles across input sizes.

Tolerances: fp64 1e-12 and fp32 1e-5 absolute on unit-scale inputs (both
paths compute the same products in a different order); bf16 inputs: both
paths rotate in fp32 and round once to bf16, so outputs differ by at most
one bf16 rounding step (``2 ** -8`` relative), checked as 1e-2 relative /
1e-2 absolute.
"""
import pytest
import torch
import torch._dynamo as dynamo

from mmpos.models.backbones import RoPEVisionTransformer
from mmpos.models.layers import (RoPEAttention, apply_rope,
                                 apply_rope_phasors, build_position_scheme,
                                 grid_coords, rope_phasors, rope_tables)

TOL = {torch.float64: dict(atol=1e-12, rtol=0),
       torch.float32: dict(atol=1e-5, rtol=0),
       torch.bfloat16: dict(atol=1e-2, rtol=1e-2)}


def pair(rope_type, layout, heads=2, **kw):
    """An eager and a fast one-block RoPE scheme with identical
    frequencies."""
    eager, fast = (build_position_scheme(
        dict(type=rope_type, layout=layout, impl=impl, **kw), 16, heads, 1)
        for impl in ('eager', 'fast'))
    fast.load_state_dict(eager.state_dict())
    return eager, fast


def rotate(rope, x, coords=None, hw=None):
    """``x`` rotated by the scheme's block-0 table of ``coords`` / the
    ``hw`` grid, in fp32 (fp64 for fp64 inputs)."""
    coords = grid_coords(*hw) if coords is None else coords
    coords = coords if coords.dim() == 3 else coords[None]
    dtype = torch.promote_types(x.dtype, torch.float32)
    return rope.block_table(0, coords.to(dtype)).rotate(x)


def qk_view(batch=2, tokens=7, heads=2, dim=16, dtype=torch.float32):
    """``qkv[:2]`` of an attention layer: a strided view, as in
    :class:`RoPEAttention`."""
    qkv = torch.randn(batch, tokens, 3, heads, dim, dtype=torch.float64)
    return qkv.to(dtype).permute(2, 0, 3, 1, 4)[:2]


@pytest.mark.parametrize('dtype', [torch.float64, torch.float32,
                                   torch.bfloat16])
@pytest.mark.parametrize('layout', ['pairs', 'half'])
@pytest.mark.parametrize('rope_type', ['axial', 'mixed'])
def test_fast_path_equals_eager(rope_type, layout, dtype):
    torch.manual_seed(0)
    eager, fast = pair(rope_type, layout)
    coords = torch.rand(2, 6, 2) * 9 - 3
    coords[0, 2] = float('nan')  # no position: not rotated
    for pos in (dict(coords=coords), dict(hw=(2, 3)),
                dict(coords=coords[0])):
        x = qk_view(dtype=dtype)
        out = rotate(fast, x, **pos)
        assert out.dtype == dtype
        torch.testing.assert_close(out, rotate(eager, x, **pos),
                                   **TOL[dtype])
    assert torch.equal(rotate(fast, x, coords=coords)[:, 0, :, 3],
                       x[:, 0, :, 3])  # the NaN token (after 1 prefix)


@pytest.mark.parametrize('layout', ['pairs', 'half'])
@pytest.mark.parametrize('rope_type', ['axial', 'mixed'])
def test_fast_path_gradients_equal_eager(rope_type, layout):
    torch.manual_seed(0)
    eager, fast = pair(rope_type, layout)
    eager.double(), fast.double()
    coords = torch.rand(2, 6, 2, dtype=torch.float64) * 5
    qkv = qk_view(dtype=torch.float64)
    grads = []
    for rope in (eager, fast):
        x = qkv.detach().requires_grad_()
        rotate(rope, x, coords=coords).pow(3).sum().backward()
        grads.append((x.grad, rope.freqs[0].grad if rope_type == 'mixed'
                       else None))
    torch.testing.assert_close(grads[0][0], grads[1][0], **TOL[torch.float64])
    if rope_type == 'mixed':  # learnable frequencies
        torch.testing.assert_close(grads[0][1], grads[1][1],
                                   **TOL[torch.float64])


def test_phasor_functions_match_tables_and_need_no_contiguous_input():
    torch.manual_seed(0)
    coords = torch.rand(5, 2, dtype=torch.float64) * 4
    freqs = torch.randn(2, 3, 8, dtype=torch.float64)
    phasors = rope_phasors(coords, freqs)
    assert phasors.shape == (3, 5, 8) and phasors.is_complex()
    cos, sin = rope_tables(coords, freqs)
    assert torch.allclose(phasors.real, cos[..., 0::2])
    assert torch.allclose(phasors.imag, sin[..., 1::2])
    base = torch.randn(2, 3, 5, 17, dtype=torch.float64)
    for x in (base[..., :16], base[..., 1:]):  # odd offset / odd stride
        assert torch.allclose(apply_rope_phasors(x, phasors),
                              apply_rope(x, cos, sin))


def test_rope_attention_fast_equals_eager():
    torch.manual_seed(0)
    layer = RoPEAttention(64, 4)
    eager, fast = pair('mixed', 'pairs', heads=4)
    x = torch.randn(2, 13, 64)
    outs = [layer(x, rope=rope.block_table(0, grid_coords(3, 4)[None]))
            for rope in (eager, fast)]
    torch.testing.assert_close(outs[0], outs[1], **TOL[torch.float32])
    with pytest.raises(ValueError, match="impl must be one of"):
        build_position_scheme(dict(type='axial', impl='fused'), 16, 1, 1)


def tiny_vit(rope_type):
    torch.manual_seed(0)
    return RoPEVisionTransformer(
        arch=dict(embed_dims=64, num_layers=2, num_heads=2,
                  feedforward_channels=128),
        img_size=32, patch_size=8, rope_type=rope_type, use_ape=False)


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
