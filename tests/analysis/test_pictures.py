"""Pictures of a model on a real photograph (issue 16): PCA of patch
features, class attention maps, DropPos position predictions, and the
detector's / segmenter's predictions drawn by mmdet's and mmseg's
visualizers; each tool writes a non-empty PNG of the expected size."""
import numpy as np
import pytest
import torch
from mmengine.config import Config
from PIL import Image

from conftest import REPO
from mmpos.analysis.pictures import (CAPTION_PX, draw_positions, pca_rgb,
                                     save_figure, tile_grid)
from mmpos.apis import init_backbone

DEMO_ROPE = 'configs/demo/droppos_vit-tiny-rope-mixed_mini.py'
DROPPOS = 'configs/droppos/droppos_vit-tiny_mini.py'
DETECTOR = 'configs/demo/mask-rcnn_vit-tiny-rope-mixed_mini-coco.py'
SEGMENTER = 'configs/demo/upernet_vit-tiny-rope-mixed_mini-ade.py'


@pytest.fixture(scope='module')
def photo(tmp_path_factory):
    from skimage import data
    path = tmp_path_factory.mktemp('photo') / 'chelsea.png'
    Image.fromarray(data.chelsea()).save(path)
    return path


def tool(name):
    """The command-line tool ``tools/<name>.py`` as a module (its ``main``
    runs in this process: no interpreter start, no re-import)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        name.replace('/', '_'), REPO / 'tools' / f'{name}.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def png_size(path):
    assert path.is_file() and path.stat().st_size > 0, path
    with Image.open(path) as img:
        assert img.format == 'PNG'
        pixels = np.asarray(img.convert('RGB'))
    assert pixels.std() > 0  # not a blank picture
    return img.size


def test_pca_rgb_recovers_planted_components():
    """Features that vary along three directions over a 6x6 grid give the
    three variations back (up to sign) as the RGB channels in [0, 1]."""
    h = w = 6
    yy, xx = torch.meshgrid(torch.arange(h).float(), torch.arange(w).float(),
                            indexing='ij')
    raw = torch.stack([xx, yy, (xx * yy) % 2]).reshape(3, -1)
    raw = raw - raw.mean(1, keepdim=True)
    # orthogonal, zero-mean variations with decreasing variance
    signals = (torch.linalg.qr(raw.T)[0].T *
               torch.tensor([[10.], [3.], [1.]])).reshape(3, h, w)
    basis = torch.linalg.qr(torch.randn(16, 3))[0]  # orthonormal (16, 3)
    feats = torch.einsum('ck,khw->chw', basis, signals) + 5.
    rgb = pca_rgb(feats)
    assert rgb.shape == (h, w, 3) and rgb.min() == 0 and rgb.max() == 1
    for channel, signal in enumerate(signals):
        corr = np.corrcoef(rgb[..., channel].ravel(), signal.ravel())[0, 1]
        assert abs(corr) > 0.999


def test_save_figure_format_from_extension_and_closed(tmp_path):
    """The plot lands under its name in the format its extension names
    (the temporary file it is written through has another extension),
    nothing else stays in the folder, and the figure is closed."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    for name, start in (('plot.png', b'\x89PNG'), ('plot.svg', b'<?xml'),
                        ('plot', b'\x89PNG')):
        fig, ax = plt.subplots()
        ax.plot([0, 1], [1, 0])
        path = save_figure(fig, str(tmp_path / name), dpi=20)
        assert open(path, 'rb').read(5).startswith(start), name
        assert not plt.fignum_exists(fig.number)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        'plot', 'plot.png', 'plot.svg']


def test_grid_and_position_drawing_sizes():
    tiles = [[np.zeros((4, 4, 3))] * 3, [np.ones((8, 8, 3))] * 2]
    assert tile_grid(tiles, [['a'] * 3, ['b'] * 2], 50).shape == \
        (2 * (50 + CAPTION_PX), 150, 3)
    image = np.full((30, 40, 3), 128, np.uint8)
    target = torch.arange(16)
    pred = target.flip(0)
    picture = draw_positions(image, (4, 4), target, pred, target % 2 == 0,
                             size=96)
    assert picture.shape == (96, 96, 3)
    assert (picture == (230, 0, 0)).all(-1).any()  # wrong: red lines


def test_feature_pictures_tool(tmp_path, photo):
    backbone = init_backbone(DEMO_ROPE)
    torch.save(backbone.state_dict(), tmp_path / 'backbone.pth')
    tool('analysis_tools/feature_pictures').main(list(map(str, [
        DEMO_ROPE, tmp_path / 'backbone.pth', photo, '--out-dir',
        tmp_path / 'pics', '--sizes', 32, 64, '--layers', 1, -1, '--heads',
        0, 2, '--tile', 64])))
    # image + one PCA tile per size
    assert png_size(tmp_path / 'pics/chelsea_pca.png') == (3 * 64,
                                                           64 + CAPTION_PX)
    # a row per (size, block): image + 2 heads
    assert png_size(tmp_path / 'pics/chelsea_attention.png') == \
        (3 * 64, 4 * (64 + CAPTION_PX))


def test_droppos_positions_tool(tmp_path, photo, capsys):
    from mmengine.registry import init_default_scope
    from mmpos.registry import MODELS
    init_default_scope('mmpretrain')
    model = MODELS.build(Config.fromfile(DROPPOS).model)
    model.init_weights()
    torch.save({'state_dict': model.state_dict()}, tmp_path / 'droppos.pth')
    out = tmp_path / 'positions.png'
    tool('analysis_tools/droppos_positions').main(list(map(str, [
        DROPPOS, tmp_path / 'droppos.pth', photo, '--out', out, '--size',
        200])))
    assert png_size(out) == (200, 200)
    assert 'position accuracy on the dropped positions' in \
        capsys.readouterr().out


@pytest.mark.parametrize('config, scope', [(DETECTOR, 'mmdet'),
                                           (SEGMENTER, 'mmseg')])
def test_infer_draws_predictions(tmp_path, photo, config, scope):
    """A whole-model checkpoint (random weights) drawn by the library's
    visualizer on the photograph, at the photograph's size."""
    import importlib
    from mmengine.registry import init_default_scope
    importlib.import_module(f'{scope}.models')
    registry = importlib.import_module(f'{scope}.registry').MODELS
    cfg = Config.fromfile(config)
    init_default_scope(scope)
    cfg.model.backbone.init_cfg = None
    model = registry.build(cfg.model)
    model.init_weights()
    torch.save({'state_dict': model.state_dict(), 'meta': {}},
               tmp_path / 'model.pth')
    infer = tool('infer')
    infer.main(list(map(str, [config, tmp_path / 'model.pth', photo,
                              '--out-dir', tmp_path / 'out', '--score-thr',
                              0])))
    assert png_size(tmp_path / 'out/chelsea_pred.png') == Image.open(
        photo).size
    with pytest.raises(SystemExit,
                       match='infer.py: error: checkpoint not found'):
        infer.main([config, str(tmp_path / 'nope.pth'), str(photo)])
