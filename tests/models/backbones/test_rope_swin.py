"""RoPESwinTransformer: RoPE window attention (no bias table), shapes at
several resolutions and window sizes, window-size change at inference, and
building from mmdet configs."""
import pytest
import torch

import mmpos  # noqa: F401
from mmpos.models.backbones.rope_swin import (RoPESwinTransformer,
                                              RoPEWindowMSA)
from mmpos.models.layers import RoPEAttention
from mmpos.models.layers.positions import build_position_scheme, grid_coords

ARCH = dict(embed_dims=32, depths=[2, 2, 2, 2], num_heads=[1, 2, 4, 8])


def tiny(**kwargs):
    torch.manual_seed(0)
    kwargs.setdefault('out_indices', (0, 1, 2, 3))
    model = RoPESwinTransformer(arch=ARCH, drop_path_rate=0., **kwargs)
    model.init_weights()
    model.eval()  # mmpretrain's SwinTransformer.train returns None
    return model


@pytest.mark.parametrize('rope_type', ['axial', 'mixed', 'lookhere', 'pape'])
def test_one_window_equals_global_rope_attention(rope_type):
    """A single window is plain attention on the ws x ws grid with the
    scheme's rotation and bias (the shared RoPE layer, no class token):
    LookHere's and PaPE's biases are applied, not left out."""
    torch.manual_seed(0)
    window = RoPEWindowMSA(32, (4, 4), 2).eval()
    attn = RoPEAttention(32, 2).eval()
    attn.load_state_dict(window.state_dict(), strict=True)
    rope = build_position_scheme(dict(type=rope_type), 16, 2, 1)
    window.rope_table = rope.block_table(0, grid_coords(4, 4)[None])
    x = torch.randn(3, 16, 32)
    with torch.no_grad():
        out = window(x)
        torch.testing.assert_close(out, attn(x, rope=window.rope_table),
                                   atol=1e-5, rtol=1e-5)
        if rope_type in ('lookhere', 'pape'):
            window.rope_table = None
            assert not torch.allclose(window(x), out, atol=1e-3)


@pytest.mark.parametrize('rope_type', ['lookhere', 'pape'])
def test_bias_schemes_with_the_shift_mask_are_per_window_attention(
        rope_type):
    """Shifted windows: every window's logits get the scheme's bias (PaPE:
    read from that window's tokens) plus its region mask, as softmax(q k^T
    / sqrt(D) + bias + mask) written out per window."""
    torch.manual_seed(0)
    window = RoPEWindowMSA(32, (2, 2), 2).eval()
    rope = build_position_scheme(dict(type=rope_type), 16, 2, 1)
    window.rope_table = rope.block_table(0, grid_coords(2, 2)[None])
    x = torch.randn(2 * 3, 4, 32)  # B = 2, 3 windows
    mask = torch.zeros(3, 4, 4)
    mask[1, :2, 2:] = mask[1, 2:, :2] = -100.
    table = window.rope_table
    with torch.no_grad():
        out = window(x, mask=mask)
        for w in range(6):
            bound = table.bind(x[w:w + 1]) if rope_type == 'pape' else table
            q, k, v = window.qkv(x[w]).reshape(4, 3, 2, 16).permute(1, 2, 0,
                                                                    3)
            logits = q @ k.transpose(-2, -1) / 4 + bound.attn_bias[0] + \
                mask[w % 3]
            y = (logits.softmax(-1) @ v).transpose(0, 1).reshape(4, 32)
            torch.testing.assert_close(out[w], window.proj(y), atol=1e-5,
                                       rtol=1e-5)


def test_shift_mask_matches_per_window_masking():
    window = RoPEWindowMSA(32, (2, 2), 2).eval()
    x = torch.randn(2 * 3, 4, 32)  # B = 2, 3 windows
    mask = torch.zeros(3, 4, 4)
    mask[1, :2, 2:] = mask[1, 2:, :2] = -100.  # window 1: two regions
    out = window(x, mask=mask)
    # window 1 of sample 1: tokens {0, 1} never attend to {2, 3}
    x_changed = x.clone()
    x_changed[4, 2:] += 1.
    assert torch.allclose(window(x_changed, mask=mask)[4, :2], out[4, :2],
                          atol=1e-5)
    assert torch.allclose(window(x[:3], mask=mask), out[:3], atol=1e-5)


@pytest.mark.parametrize('rope_type', ['axial', 'mixed'])
def test_shapes_at_several_resolutions_and_windows(rope_type):
    model = tiny(rope=dict(type=rope_type))
    for (h, w), window in [((224, 224), 7), ((320, 320), 10),
                           ((224, 320), 7), ((128, 128), 4)]:
        model.set_window_size(window)
        with torch.no_grad():
            outs = model(torch.randn(1, 3, h, w))
        assert [tuple(o.shape) for o in outs] == [
            (1, 32 * 2**i, h // 2**(i + 2), w // 2**(i + 2))
            for i in range(4)
        ], (h, w, window)


def test_no_bias_table_and_per_block_frequencies():
    keys = tiny().state_dict().keys()
    assert not [k for k in keys if 'relative_position' in k]
    freqs = [k for k in keys if k.startswith('rope.')]
    assert len(freqs) == 8
    assert 'rope.3.freqs.1' in freqs
    assert tiny(rope=dict(type='axial')).state_dict().keys().isdisjoint(
        freqs)


def test_window_size_change_at_inference():
    model = tiny(window_size=7)
    assert model.window_size == [7, 7, 7, 7]
    img = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        before = model(img)
        state = {k: v.clone() for k, v in model.state_dict().items()}
        model.set_window_size([8, 8, 7, 7])
        changed = model(img)
    assert model.window_size == [8, 8, 7, 7]
    assert model.stages[0].blocks[1].attn.shift_size == 4
    assert model.stages[0].blocks[0].attn.shift_size == 0
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in
               state.items())
    assert not torch.allclose(before[0], changed[0], atol=1e-4)
    assert torch.allclose(
        tiny(window_size=[8, 8, 7, 7])(img)[0], changed[0], atol=1e-5)
    with pytest.raises(ValueError, match='one per stage'):
        model.set_window_size([7, 7])


def test_builds_in_mmdet():
    from mmdet.registry import MODELS as MMDET_MODELS
    from mmengine.registry import DefaultScope
    with DefaultScope.overwrite_default_scope('mmdet'):
        backbone = MMDET_MODELS.build(
            dict(type='mmpretrain.RoPESwinTransformer', arch=ARCH,
                 rope=dict(type='axial'), out_indices=(1, 2, 3),
                 pad_small_map=True, window_size=7))
    assert isinstance(backbone, RoPESwinTransformer)
    with torch.no_grad():
        outs = backbone(torch.randn(1, 3, 96, 160))
    assert [tuple(o.shape[-2:]) for o in outs] == [(12, 20), (6, 10),
                                                  (3, 5)]


def test_rope_plus_rpb_is_swin_window_attention_at_zero_frequency():
    """RoPE+RPB (Tables 2, 4): with the RoPE-Mixed frequencies at 0 (no
    rotation) the window attention is mmpretrain's WindowMSA with the same
    weights and bias table, shift mask included; the table loads from a Swin
    state dict."""
    from mmpretrain.models.utils.attention import WindowMSA
    torch.manual_seed(0)
    swin = WindowMSA(32, (3, 3), 2).eval()
    swin.init_weights()
    rope = RoPEWindowMSA(32, (3, 3), 2, use_rpb=True).eval()
    rope.init_weights()
    missing, unexpected = rope.load_state_dict(swin.state_dict(),
                                               strict=False)
    assert missing == [] and unexpected == []  # no table set: no rotation
    x = torch.randn(4, 9, 32)
    mask = torch.zeros(2, 9, 9)
    mask[1, :4, 4:] = mask[1, 4:, :4] = -100.
    with torch.no_grad():
        for m in (None, mask):
            torch.testing.assert_close(rope(x, m), swin(x, m), rtol=1e-5,
                                       atol=1e-5)
    model = tiny(use_rpb=True)
    assert any('relative_position_bias_table' in k
               for k in model.state_dict())
    with pytest.raises(ValueError, match='use_rpb'):
        model.set_window_size(2)


def test_rpb_without_rope_is_mmpretrain_swin():
    """rope=None, use_rpb=True is Swin (the RPB baseline): a Swin
    state dict loads strictly and gives Swin's outputs."""
    from mmpretrain.models.backbones import SwinTransformer
    torch.manual_seed(0)
    swin = SwinTransformer(arch=ARCH, window_size=2, drop_path_rate=0.,
                           out_indices=(0, 1, 2, 3))
    swin.init_weights()
    swin.eval()
    model = tiny(rope=None, use_rpb=True, window_size=2)
    model.load_state_dict(swin.state_dict(), strict=True)
    img = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        for a, b in zip(model(img), swin(img)):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_mixed_frequencies_share_their_blocks_lr_depth():
    """Layer-wise lr decay: stage i's block j frequencies ``rope.<i>.freqs.
    <j>`` get the depth of that block (mmpretrain's Swin depths)."""
    model = tiny()
    for i, j in ((0, 1), (2, 0), (3, 1)):
        assert model.get_layer_depth(f'rope.{i}.freqs.{j}') == \
            model.get_layer_depth(f'stages.{i}.blocks.{j}.attn.w_msa.qkv.'
                                  'weight')
