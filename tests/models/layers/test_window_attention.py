"""ViTDet window attention in RoPEVisionTransformer: one window over the
whole grid is global attention, a windowed block equals the global block
restricted to its windows (the same RoPE logits for every pair inside a
window: absolute coordinates), padding gives the grid back, activation
checkpointing changes nothing, pretraining checkpoints load, and ViTDet's
decomposed relative position bias equals mmpretrain's (SAM/ViTDet) one."""
import pytest
import torch
import torch.nn.functional as F

import mmpos  # noqa: F401  (registers into mmpretrain)
from mmpos.models.backbones import RoPEVisionTransformer
from mmpos_positions import grid_coords
from mmpos_positions.window import (padded_hw, window_partition,
                                    window_unpartition)

TINY = dict(embed_dims=32, num_layers=3, num_heads=2, feedforward_channels=64)


def rope(rope_type):
    """``rope=`` of a scheme name (``'none'``: no RoPE)."""
    return None if rope_type == 'none' else dict(type=rope_type)


def tiny(seed=0, **kwargs):
    torch.manual_seed(seed)
    cfg = dict(arch=TINY, out_type='featmap', with_cls_token=False,
               out_indices=(0, 1, 2))
    model = RoPEVisionTransformer(**{**cfg, **kwargs})
    model.init_weights()
    return model.eval()


def test_partition_roundtrip_and_coords_on_a_padded_grid():
    x = torch.randn(2, 5 * 7, 3)
    windows = window_partition(x, (5, 7), 3)  # padded to 6 x 9: 2 x 3 windows
    assert windows.shape == (2 * 6, 9, 3)
    assert torch.equal(window_unpartition(windows, (5, 7), 3), x)
    padded = padded_hw((5, 7), 3)  # the grid the windows continue
    coords = window_partition(grid_coords(*padded)[None], padded, 3).repeat(
        2, 1, 1)
    assert coords.shape == (12, 9, 2)
    # window (row 1, column 2) of the second image: x in 6..8, y in 3..5,
    # and its tokens are the grid tokens at those coordinates
    assert torch.equal(coords[6 + 5], torch.tensor(
        [[x_, y_] for y_ in (3., 4., 5.) for x_ in (6., 7., 8.)]))
    grid = grid_coords(5, 7)
    inside = (coords[6 + 5, :, 0] < 7) & (coords[6 + 5, :, 1] < 5)
    index = (coords[6 + 5, inside, 1] * 7 + coords[6 + 5, inside, 0]).long()
    assert torch.equal(windows[6 + 5, inside], x[1, index])
    assert torch.equal(grid[index], coords[6 + 5, inside])
    assert torch.all(windows[6 + 5, ~inside] == 0)  # zero padding


@pytest.mark.parametrize('rope_type,use_ape', [('mixed', False),
                                               ('axial', True),
                                               ('none', True)])
def test_one_window_over_the_whole_grid_is_global_attention(rope_type,
                                                            use_ape):
    glob = tiny(rope=rope(rope_type), use_ape=use_ape)
    win = tiny(rope=rope(rope_type), use_ape=use_ape, window_size=4,
               global_attn_indexes=(1, ))
    win.load_state_dict(glob.state_dict())
    img = torch.randn(2, 3, 64, 64)  # 4 x 4 grid = one 4 x 4 window
    with torch.no_grad():
        for a, b in zip(glob(img), win(img)):
            if rope_type == 'axial':
                # the global grid's axial tables are cached from fp64
                # angles, explicit (window) coordinates rotate in fp32
                torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
            else:
                assert torch.equal(a, b)


@pytest.mark.parametrize('rope_coords', [
    dict(frame='separate'),
    dict(frame='max', shift=0.1, jitter=1.2, rescale=2.)])
def test_windows_keep_the_global_coordinates_of_any_frame(rope_coords):
    """DINOv3-style frames (and per-sample augmentation, same seed): one
    window over the whole grid is global attention; on a padded grid the
    tokens of the image keep the grid's shape."""
    opts = dict(rope=dict(type='axial', layout='half', axes='yx',
                          periods=dict(base=100.), coords=rope_coords))
    glob = tiny(**opts)
    win = tiny(**opts, window_size=4, global_attn_indexes=(1, ))
    win.load_state_dict(glob.state_dict())
    glob.train()
    win.train()
    img = torch.randn(2, 3, 64, 64)  # 4 x 4 grid = one 4 x 4 window
    with torch.no_grad():
        torch.manual_seed(3)
        expected = glob(img)
        torch.manual_seed(3)
        got = win(img)
        for a, b in zip(expected, got):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        odd = win(torch.randn(2, 3, 80, 48))  # 5 x 3 grid, padded to 8 x 4
    assert all(o.shape == (2, 32, 5, 3) and torch.isfinite(o).all()
               for o in odd)


def test_windows_refuse_register_tokens():
    with pytest.raises(ValueError, match='num_register_tokens=0'):
        tiny(window_size=4, num_register_tokens=4)


def _block_diagonal_mask(hw, ws):
    """(N, N) True where two grid tokens share a ws x ws window."""
    y, x = grid_coords(*hw).long().unbind(-1)[::-1]
    win = (y // ws) * 1000 + x // ws
    return win[:, None] == win[None, :]


@pytest.mark.parametrize('rope_type', ['mixed', 'axial'])
def test_windowed_block_is_the_global_block_restricted_to_windows(rope_type):
    """A windowed block's output equals the global block's with attention
    masked to each token's window: every query-key logit inside a window is
    the global model's (RoPE at absolute coordinates) for that pair."""
    glob = tiny(rope=rope(rope_type))
    win = tiny(rope=rope(rope_type), window_size=2)
    win.load_state_dict(glob.state_dict())
    hw, ws = (4, 6), 2
    x = torch.randn(2, 24, 32)
    layer = glob.layers[0]
    mask = _block_diagonal_mask(hw, ws)

    def masked_attention(q, k, v, dropout_p=0., **kwargs):
        logits = (q @ k.transpose(-2, -1)) / q.shape[-1]**.5
        return logits.masked_fill(~mask, float('-inf')).softmax(-1) @ v

    with torch.no_grad():
        windowed = win.layers[0](x, hw=hw)
        sdpa = F.scaled_dot_product_attention
        F.scaled_dot_product_attention = masked_attention
        try:
            reference = layer(x, hw=hw)
        finally:
            F.scaled_dot_product_attention = sdpa
    torch.testing.assert_close(windowed, reference, rtol=1e-5, atol=1e-5)


def test_rope_logit_inside_a_window_equals_the_global_logit():
    """The rotated query and key of a token pair inside a window (window
    coordinates) give the same logit as on the global grid, also for a
    window away from the origin."""
    scheme = tiny(rope=rope('mixed')).rope  # block 0's table
    hw, ws = (6, 6), 3
    q, k = torch.randn(2, 1, 2, 36, 16).unbind(0)
    grid = grid_coords(*hw)[None]
    glob_q, glob_k = scheme.block_table(0, grid).rotate(
        torch.stack((q, k))).unbind(0)
    glob_logits = glob_q @ glob_k.transpose(-2, -1)
    win_coords = window_partition(grid, hw, ws)  # (4, 9, 2)
    win_q, win_k = scheme.block_table(0, win_coords).rotate(
        torch.stack([window_partition(t[0].transpose(0, 1).flatten(1)[None],
                                      hw, ws).unflatten(-1, (2, 16))
                     .transpose(1, 2) for t in (q, k)])).unbind(0)
    win_logits = win_q @ win_k.transpose(-2, -1)  # (4 windows, 2, 9, 9)
    index = window_partition(torch.arange(36.).view(1, 36, 1), hw, ws)
    index = index[..., 0].long()  # grid index of each window token
    for w in range(4):
        expected = glob_logits[0][:, index[w]][:, :, index[w]]
        torch.testing.assert_close(win_logits[w], expected, rtol=1e-5,
                                   atol=1e-5)


@pytest.mark.parametrize('size', [(80, 112), (48, 64)])
def test_grid_not_a_multiple_of_the_window_gives_the_grid_back(size):
    model = tiny(window_size=4, global_attn_indexes=(2, ), use_ape=True,
                 out_type='raw')
    h, w = size[0] // 16, size[1] // 16
    with torch.no_grad():
        outs = model(torch.randn(1, 3, *size))
    assert all(out.shape == (1, h * w, 32) for out in outs)


def test_activation_checkpointing_gives_the_same_step():
    img = torch.randn(1, 3, 48, 80)
    grads = []
    for with_cp in (False, True):
        model = tiny(window_size=2, global_attn_indexes=(1, ),
                     with_cp=with_cp, drop_path_rate=0.).train()
        model(img)[-1].square().mean().backward()
        grads.append([p.grad for p in model.parameters()])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b)


def test_invalid_window_options():
    with pytest.raises(ValueError, match='with_cls_token=False'):
        RoPEVisionTransformer(arch=TINY, window_size=4, out_type='featmap')
    with pytest.raises(ValueError, match='global_attn_indexes'):
        tiny(window_size=4, global_attn_indexes=(3, ))
    model = tiny(window_size=2, out_type='raw')
    tokens = torch.randn(1, 9, 32)
    with pytest.raises(ValueError, match='patch grid'):
        model.forward_tokens(tokens, coords=grid_coords(3, 3))
    with pytest.raises(ValueError, match='exactly the 3x3 grid'):
        model.forward_tokens(tokens[:, :4], coords=grid_coords(2, 2),
                             hw=(3, 3))
    # explicit grid coordinates are the grid (4 x 4: no padding)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))  # non-zero qkv biases too
        tokens = torch.randn(1, 16, 32)
        for a, b in zip(model.forward_tokens(tokens, hw=(4, 4)),
                        model.forward_tokens(tokens, coords=grid_coords(4, 4),
                                             hw=(4, 4))):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('grid', [(8, 8), (6, 5)])
def test_rel_pos_bias_equals_mmpretrain_vitdet_attention(grid):
    """Tables built for an 8x8 grid, on that grid and interpolated to 6x5:
    the attention with ViTDet's decomposed relative position bias equals
    mmpretrain's ``vit_sam.Attention`` (SAM's copy of ViTDet's) on the same
    random weights."""
    from mmpretrain.models.backbones.vit_sam import Attention

    from mmpos.models.layers import RoPEAttention
    torch.manual_seed(0)
    peer = Attention(32, num_heads=4, use_rel_pos=True, input_size=(8, 8))
    with torch.no_grad():
        peer.rel_pos_h.normal_()
        peer.rel_pos_w.normal_()
    ours = RoPEAttention(32, 4, rel_pos_size=(8, 8))
    ours.load_state_dict(peer.state_dict())
    x = torch.randn(2, *grid, 32)
    with torch.no_grad():
        expected = peer(x).reshape(2, -1, 32)
        got = ours(x.reshape(2, -1, 32), hw=grid)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match='grid of all'):
        ours(x.reshape(2, -1, 32))


def test_windowed_rel_pos_backbone():
    """With the bias (tables: 2 ws - 1 offsets in windowed blocks, the
    img_size grid's in global ones) one window over the whole grid is still
    global attention, and the bias changes the output once non-zero."""
    glob = tiny(rope=None, use_ape=True, img_size=64,
                use_rel_pos=True)
    win = tiny(rope=None, use_ape=True, img_size=64, use_rel_pos=True,
               window_size=4, global_attn_indexes=(1, ))
    assert win.layers[0].attn.rel_pos_h.shape == (7, 16)
    assert win.layers[1].attn.rel_pos_w.shape == (7, 16)  # 64 px: 4 x 4
    with torch.no_grad():
        before = glob(torch.ones(1, 3, 64, 64))[-1]
        for name, p in glob.named_parameters():
            if 'rel_pos' in name:
                p.normal_()
    win.load_state_dict(glob.state_dict())
    img = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        for a, b in zip(glob(img), win(img)):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
        assert not torch.allclose(glob(torch.ones(1, 3, 64, 64))[-1], before)
        # windows of 3 on the 4 x 4 grid (padded to 6 x 6): the tables of
        # the windowed blocks have 5 rows, the global block's 7
        padded = tiny(rope=None, use_ape=True, img_size=64,
                      use_rel_pos=True, window_size=3,
                      global_attn_indexes=(1, ))
        assert padded.layers[0].attn.rel_pos_h.shape == (5, 16)
        assert padded(img)[-1].shape == (2, 32, 4, 4)
    with pytest.raises(ValueError, match='use_rel_pos=True needs'):
        RoPEVisionTransformer(arch=TINY, use_rel_pos=True, out_type='featmap')


DOWNSTREAM = 'configs/demo/vitdet_mask-rcnn_vit-tiny-rope-mixed_mini-coco.py'
# pretraining mini config, downstream position scheme
PRETRAINING = {
    'droppos': ('configs/droppos/droppos_vit-tiny_mini.py',
                dict(rope=None, use_ape=True, img_size=32)),
    'cr2pq': ('configs/cr2pq/cr2pq_vit-tiny_mini.py',
              dict(rope=dict(type='axial'))),
    'icpf': ('configs/icpf/icpf_vit-tiny_mini.py',
             dict(rope=None, use_ape=True, img_size=128)),
}


@pytest.mark.parametrize('method', sorted(PRETRAINING))
def test_pretraining_checkpoint_loads_into_the_windowed_backbone(
        method, tmp_path, capsys):
    """The mini pretraining model's checkpoint, extracted (ICPF: its field
    exported to APE) by mmpos2backbone against the windowed ViTDet config,
    loads into the windowed backbone with 0 missing keys: window attention
    adds none; the class token (and its APE slot) are left over."""
    import importlib.util

    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmpretrain.registry import MODELS

    from conftest import REPO
    from mmpos.models.utils.pretrained import load_pretrained
    config, scheme = PRETRAINING[method]
    init_default_scope('mmpretrain')
    torch.manual_seed(0)
    model = MODELS.build(Config.fromfile(REPO / config).model)
    src = tmp_path / 'pretrain.pth'
    torch.save(dict(state_dict=model.state_dict()), src)
    downstream = tmp_path / 'windowed.py'
    downstream.write_text(f"_base_ = ['{REPO / DOWNSTREAM}']\n"
                          f'model = dict(backbone={scheme!r})\n')
    spec = importlib.util.spec_from_file_location(
        'mmpos2backbone', REPO / 'tools/model_converters/mmpos2backbone.py')
    converter = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(converter)
    dst = tmp_path / 'backbone.pth'
    converter.main([str(src), str(dst), '--keep-prefix', '--config',
                    str(downstream), '--drop-unexpected'])
    out = capsys.readouterr().out
    assert '0 missing key(s)' in out
    if method == 'icpf':  # the field on the 16x16 grid, without class slot
        assert 'sampled on a 16x16 patch grid' in out
        assert 'class-token slot dropped' in out

    cfg = Config.fromfile(downstream).model.backbone
    cfg.init_cfg = None
    backbone = RoPEVisionTransformer(
        **{k: v for k, v in cfg.items() if k != 'type'})
    report = load_pretrained(backbone, str(dst), prefix='backbone.',
                             resizable=('pos_embed', ))
    assert report['missing'] == []
    assert report['unexpected'] == []  # the converter dropped cls_token
    assert len(report['matched']) == len(backbone.state_dict())
    with torch.no_grad():
        out = backbone.eval()(torch.randn(1, 3, 96, 112))[-1]
    assert out.shape == (1, 96, 12, 14) and torch.isfinite(out).all()


VITDET_B = dict(arch='b', img_size=1024, patch_size=16, window_size=14,
                global_attn_indexes=(2, 5, 8, 11), with_cls_token=False,
                out_type='featmap', use_ape=True, rope=None)


def test_vitdet_b_tables_follow_the_finetuning_size():
    """ViTDet-B at 1024 (issue 22): global blocks' relative position tables
    over the 64 x 64 grid (2 * 64 - 1 = 127 rows), windowed ones over the
    14 x 14 window (27 rows), the APE table over 64 x 64, no class slot."""
    model = RoPEVisionTransformer(**VITDET_B, use_rel_pos=True,
                                  pretrain_img_size=224)
    for i, layer in enumerate(model.layers):
        rows = 127 if i in (2, 5, 8, 11) else 27
        assert layer.attn.rel_pos_h.shape == (rows, 64), i
        assert layer.attn.rel_pos_w.shape == (rows, 64), i
    assert model.pos_embed.shape == (1, 64 * 64, 768)


def test_pretraining_ape_with_class_slot_loads_once_into_a_larger_grid():
    """A 224 px checkpoint (14 x 14 APE with a class-token slot) loads into
    a class-token-free backbone built for the fine-tuning size with no
    missing key; its table is resized once, at load, so the output at that
    grid (20 x 27) equals the blocks run on the patches plus one resize of
    the checkpoint's table."""
    from mmpretrain.models.utils import resize_pos_embed
    arch = dict(embed_dims=32, num_layers=2, num_heads=2,
                feedforward_channels=64)
    torch.manual_seed(0)
    source = RoPEVisionTransformer(arch=arch, img_size=224, use_ape=True,
                                   rope=None)
    source.init_weights()
    state = source.state_dict()
    assert state['pos_embed'].shape == (1, 1 + 14 * 14, 32)
    for pretrain_img_size in (224, None):  # given, or inferred (square)
        model = RoPEVisionTransformer(
            arch=arch, img_size=(320, 432), use_ape=True, rope=None,
            with_cls_token=False, out_type='featmap', window_size=7,
            pretrain_img_size=pretrain_img_size).eval()
        missing, unexpected = model.load_state_dict(state, strict=False)
        assert missing == [] and unexpected == ['cls_token']
        once = resize_pos_embed(state['pos_embed'][:, 1:], (14, 14),
                                (20, 27), 'bicubic', 0)
        torch.testing.assert_close(model.pos_embed.data, once, rtol=0,
                                   atol=0)
        img = torch.randn(1, 3, 320, 432)
        with torch.no_grad():
            tokens, hw = model.patch_embed(img)
            expected = model.forward_tokens(tokens + once, hw=hw)[0]
            torch.testing.assert_close(model(img)[0], expected, rtol=0,
                                       atol=0)
    # its own state dict round-trips (non-square grid, no class slot)
    again = RoPEVisionTransformer(arch=arch, img_size=(320, 432),
                                  use_ape=True, rope=None,
                                  with_cls_token=False, out_type='featmap')
    again.load_state_dict(model.state_dict())
    assert torch.equal(again.pos_embed, model.pos_embed)
    with pytest.raises(ValueError, match='pretrain_img_size'):
        again.load_state_dict(dict(pos_embed=torch.zeros(1, 53, 32)),
                              strict=False)
