"""Analysis helpers (attention extraction, statistics, Fourier masks) against
hand-computed values, and the four tools end to end on mini images and a
tiny RoPE ViT: finite numbers and PNGs that PIL opens."""
import csv
import importlib.util
import json
import math

import numpy as np
import pytest
import torch
from PIL import Image

from conftest import REPO, load_tool
from mmpos.analysis.attention import (AttentionRecorder, attention_backbone,
                                      record_attention)
from mmpos.analysis.fourier import (frequency_mask, point_target,
                                    reconstruct, reconstruction_error)
from mmpos.analysis.metrics import (attention_distance, attention_entropy,
                                    attention_nmi)
from mmpos_harness.mini_data import make_unlabeled_images
from mmpos.models.backbones.rope_vit import RoPEVisionTransformer
from mmpos_positions import AxialRoPE, mixed_frequencies

ARCH = dict(embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64)
CONFIG = f"""model = dict(backbone=dict(type='RoPEVisionTransformer',
    arch={ARCH!r}, img_size=64, patch_size=16, rope=dict(type='mixed')))
"""


@pytest.fixture(scope='module')
def setup(tmp_path_factory):
    """Mini images, a tiny config and a full-model style checkpoint."""
    root = tmp_path_factory.mktemp('analysis')
    make_unlabeled_images(str(root / 'imgs'), num_images=4, img_size=64,
                          seed=0)
    (root / 'tiny.py').write_text(CONFIG)
    torch.manual_seed(0)
    model = RoPEVisionTransformer(arch=ARCH, img_size=64, patch_size=16,
                                  rope=dict(type='mixed'))
    model.init_weights()
    torch.save({'state_dict': {f'backbone.{k}': v
                               for k, v in model.state_dict().items()}},
               root / 'ckpt.pth')
    return root, model


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def assert_png(path):
    with Image.open(path) as img:
        img.load()
        assert img.size[0] > 100 and img.size[1] > 100


def test_recorded_attention_is_the_models(setup):
    """A @ v through the output projection equals the module's output, so
    the hook recomputes exactly the attention the SDPA call used."""
    _, model = setup
    model.eval()
    attn = model.layers[1].attn
    x = torch.randn(2, 1 + 9, 32)
    with AttentionRecorder(model) as rec:
        out = attn(x, hw=(3, 3))
    (a, ) = rec.maps
    assert a.shape == (2, 2, 10, 10)
    torch.testing.assert_close(a.sum(-1), torch.ones(2, 2, 10))
    v = attn.qkv(x).reshape(2, 10, 3, 2, 16).permute(2, 0, 3, 1, 4)[2]
    manual = attn.proj((a @ v).transpose(1, 2).reshape(2, 10, 32))
    torch.testing.assert_close(manual, out, atol=1e-5, rtol=1e-5)
    # hooks are removed on exit
    attn(x, hw=(3, 3))
    assert len(rec.maps) == 1
    maps = record_attention(model, torch.randn(1, 3, 48, 64))
    assert [m.shape for m in maps] == [(1, 2, 13, 13)] * 2


@pytest.mark.parametrize('scheme', ['lookhere', 'pape'])
def test_recorded_attention_holds_the_schemes_bias(scheme):
    """For a bias scheme (LookHere's fields of view, PaPE's token-read
    parabolas) with a class and a register token, softmax(q k^T / sqrt(D) +
    bias) times v through the projection is the block's output, and the
    maps differ from those without the bias."""
    torch.manual_seed(0)
    model = RoPEVisionTransformer(arch=ARCH, img_size=32, patch_size=16,
                                  num_register_tokens=1,
                                  rope=dict(type=scheme)).eval()
    attn = model.layers[0].attn
    table = model.position_tables(None, (3, 2), 1)[0]
    x = torch.randn(2, 2 + 6, 32)
    with AttentionRecorder(model) as rec, torch.no_grad():
        out = attn(x, rope=table, hw=(3, 2))
    (a, ) = rec.maps
    v = attn.qkv(x).reshape(2, 8, 3, 2, 16).permute(2, 0, 3, 1, 4)[2]
    manual = attn.proj((a @ v).transpose(1, 2).reshape(2, 8, 32))
    torch.testing.assert_close(manual, out, atol=1e-5, rtol=1e-5)
    q, k = attn.qkv(x).reshape(2, 8, 3, 2, 16).permute(2, 0, 3, 1, 4)[:2]
    unbiased = torch.softmax(q @ k.transpose(-2, -1) / 4, -1)
    assert not torch.allclose(a, unbiased, atol=1e-3)


def test_metrics_by_hand():
    n = 4  # 2x2 grid, one class token
    uniform = torch.full((1, 1, n + 1, n + 1), 1 / (n + 1))
    eye = torch.zeros(1, 1, n + 1, n + 1)
    eye[..., torch.arange(n + 1), torch.arange(n + 1)] = 1
    assert attention_nmi(uniform).item() == pytest.approx(0, abs=1e-9)
    assert attention_nmi(eye).item() == pytest.approx(1)
    assert attention_entropy(uniform).item() == pytest.approx(math.log(5))
    assert attention_entropy(eye).item() == pytest.approx(0, abs=1e-9)
    assert attention_distance(eye, (2, 2)).item() == pytest.approx(0)
    # renormalised over patches: distances 0, 1, 1, sqrt(2) averaged
    assert attention_distance(uniform, (2, 2)).item() == pytest.approx(
        (2 + math.sqrt(2)) / 4)
    # a query splitting its attention between itself and its right neighbour
    half = torch.tensor([[.5, .5], [.5, .5]]).view(1, 1, 2, 2)
    assert attention_distance(half, (1, 2), num_prefix=0).item() == \
        pytest.approx(0.5)
    with pytest.raises(ValueError, match='do not match grid'):
        attention_distance(uniform, (3, 3))


def test_fourier_masks():
    n = 32
    axial = frequency_mask(AxialRoPE(16, 1, 1).freqs.float(), n)
    ky, kx = np.nonzero(axial)
    assert np.all((ky == 0) | (kx == 0))  # axial: only the two axes
    torch.manual_seed(0)
    mixed = frequency_mask(mixed_frequencies(16, 1)[:, 0], n)
    ky, kx = np.nonzero(mixed)
    assert np.any((ky != 0) & (kx != 0))  # mixed reaches diagonal bins
    target = point_target(n)
    assert reconstruction_error(target, reconstruct(target,
                                                    np.ones((n, n),
                                                            bool))) < 1e-12
    assert 0 < reconstruction_error(target, reconstruct(target, axial)) < 1


def test_attention_backbone_loads_checkpoint(setup):
    root, model = setup
    built = attention_backbone(str(root / 'tiny.py'), str(root / 'ckpt.pth'))
    for key, value in model.state_dict().items():
        torch.testing.assert_close(built.state_dict()[key], value)


def test_attention_stats_tool(setup):
    root, _ = setup
    out = root / 'stats'
    load_tool('attention_stats').main([
        str(root / 'tiny.py'), '--checkpoint', str(root / 'ckpt.pth'),
        '--img-dir', str(root / 'imgs'), '--resolutions', '32', '48',
        '--out-dir', str(out)
    ])
    rows = read_csv(out / 'attention_stats.csv')
    assert [(r['resolution'], r['layer']) for r in rows] == [
        ('32', '0'), ('32', '1'), ('48', '0'), ('48', '1')]
    for r in rows:
        dist, ent = float(r['distance_px']), float(r['entropy'])
        tokens = 1 + (int(r['resolution']) // 16)**2
        assert 0 < dist < 16 * 3 and 0 < ent <= math.log(tokens) + 1e-9
    assert json.loads((out / 'attention_stats.json').read_text())[
        'num_images'] == 4
    assert_png(out / 'attention_stats.png')


def test_attention_nmi_tool(setup):
    root, _ = setup
    out = root / 'nmi'
    load_tool('attention_nmi').main([
        str(root / 'tiny.py'), '--checkpoint', str(root / 'ckpt.pth'),
        '--img-dir', str(root / 'imgs'), '--img-size', '64', '--queries',
        '0.5,0.5', '0.1,0.9', '--out-dir', str(out)
    ])
    rows = read_csv(out / 'attention_nmi.csv')
    assert len(rows) == 2
    for r in rows:
        assert 0 <= float(r['nmi']) <= 1 and np.isfinite(float(r['mad_px']))
    assert_png(out / 'attention_nmi.png')
    assert_png(out / 'attention_queries.png')


def test_rope_fourier_tool(setup):
    root, _ = setup
    for argv, name in (([], 'init'), (['--head', '-1'], 'all'), (['--config', str(root / 'tiny.py'),
                                       '--checkpoint', str(root / 'ckpt.pth'),
                                       '--layer', '1', '--head', '1'],
                                      'ckpt')):
        out = root / f'fourier_{name}'
        load_tool('rope_fourier').main(argv + ['--grid', '32', '--out-dir',
                                               str(out)])
        result = json.loads((out / 'rope_fourier.json').read_text())
        for variant in ('axial', 'mixed'):
            assert result[variant]['bins'] > 1
            assert 0 < result[variant]['rel_l2_error'] < 1
        assert_png(out / 'rope_fourier.png')
    assert result['head_dim'] == 16


def test_plot_curves_tool(tmp_path):
    for name, losses in (('a', [3.0, 2.0]), ('b', [4.0, 1.0])):
        logs = tmp_path / name / '20240101_000000' / 'vis_data'
        logs.mkdir(parents=True)
        records = [dict(lr=0.1, loss=v, step=10 * (i + 1))
                   for i, v in enumerate(losses)]
        records.append({'mIoU': 50.0, 'step': 20})
        (logs / 'scalars.json').write_text('\n'.join(map(json.dumps,
                                                          records)))
    out = tmp_path / 'curves'
    load_tool('plot_curves').main([
        str(tmp_path / 'a'), str(tmp_path / 'b'), '--keys', 'loss', 'mIoU',
        'absent', '--out-dir', str(out)
    ])
    rows = read_csv(out / 'curves.csv')
    assert [(r['run'], r['key'], r['step'], r['value']) for r in rows] == [
        ('a', 'loss', '10', '3.0'), ('a', 'loss', '20', '2.0'),
        ('a', 'mIoU', '20', '50.0'), ('b', 'loss', '10', '4.0'),
        ('b', 'loss', '20', '1.0'), ('b', 'mIoU', '20', '50.0')]
    assert_png(out / 'curves.png')


def test_droppos_accuracy_heatmap(tmp_path):
    """The 16-case position accuracy table as a heatmap PNG: a case at 100%
    adds a whole cell in the top colour of the map (beyond the colour bar's
    strip)."""
    tool = load_tool('droppos_position_acc')
    top = np.array([253, 231, 37])  # viridis at 1.0

    def top_pixels(acc, name):
        tool.plot_table(acc, str(tmp_path / name))
        assert_png(tmp_path / name)
        with Image.open(tmp_path / name) as img:
            pixels = np.asarray(img.convert('RGB'), dtype=float)
        return int((np.abs(pixels - top).sum(-1) < 30).sum())

    flat = {(g, p): 50. for g in tool.GAMMAS for p in tool.GAMMAS_POS}
    assert len(flat) == 16
    best = dict(flat)
    best[0., .25] = 100.
    assert top_pixels(best, 'best.png') > top_pixels(flat, 'flat.png') + 1000
