"""mini-NYU's generator: deterministic per seed, a pinhole camera whose
pose, field of view and crop are drawn per image, and -- the point of
drawing them -- a per-pixel depth prior from the training images that is
about as good as a constant on the validation images (with the camera
fixed, the same rooms give the prior a clear lead). mini-NYU layers (the
method ranking's depth data): what reads the image's content gets far
more than the image-free prior and the raw pixels do."""
import numpy as np
import pytest
import torch

from mmpos.evaluation.depth_probe import (depth_constant_baseline,
                                          depth_data, depth_prior_baseline)
from mmpos_harness.mini_data import make_mini_layers, make_mini_nyu
from mmpos_harness.mini_data._io import _rng
from mmpos_harness.mini_data.depth import (_NYU, _rays, _rotation,
                                           _sample_scene, _scene_depth)


def files(root):
    return {p.relative_to(root): p.read_bytes()
            for p in sorted(root.rglob('*')) if p.is_file()}


def test_deterministic_per_seed(tmp_path):
    written = {}
    for name, seed in (('a', 0), ('b', 0), ('c', 1)):
        make_mini_nyu(str(tmp_path / name), num_train=3, num_val=2,
                      img_size=32, seed=seed)
        written[name] = files(tmp_path / name)
    assert written['a'] == written['b']
    pngs = [p for p in written['a'] if p.suffix == '.png']
    assert len(pngs) == 5 and {p.parts[:2] for p in pngs} == {
        ('annotations', 'train'), ('annotations', 'test')}
    assert all(written['a'][p] != written['c'].get(p) for p in pngs)


def test_camera_model():
    """Rotation: orthonormal; pitch > 0 turns the optical axis down (+y),
    yaw > 0 right (+x), roll turns the image axes about the optical axis.
    Rays: the one through the principal point is the optical axis, and
    neighbouring pixel centres are 1 / f apart on the image plane, ``f =
    size / (2 tan(fov / 2))``."""
    assert np.allclose(_rotation(0., 0., 0.), np.eye(3))
    rot = _rotation(0.3, -0.2, 0.4)
    assert np.allclose(rot @ rot.T, np.eye(3))
    assert np.isclose(np.linalg.det(rot), 1)
    axis = np.array([0., 0., 1.])
    assert _rotation(0., 0.3, 0.)[1] @ axis == pytest.approx(np.sin(0.3))
    assert _rotation(0.3, 0., 0.)[0] @ axis == pytest.approx(np.sin(0.3))
    rolled = _rotation(0., 0., 0.3)
    assert np.allclose(rolled @ axis, axis)
    assert rolled[:, 0] == pytest.approx([np.cos(0.3), np.sin(0.3), 0.])
    size, fov = 32, np.radians(70)
    scene = dict(yaw=0.3, pitch=-0.2, roll=0.4, fov=fov,
                 centre=np.array([10.5, 20.5]) / size)
    rays = _rays(scene, size)
    rot = _rotation(0.3, -0.2, 0.4)
    assert np.allclose(rays[:, 20, 10], rot @ axis)
    cam = np.einsum('ji,jhw->ihw', rot, rays)  # back to the camera frame
    focal = size / (2 * np.tan(fov / 2))
    assert np.allclose(np.diff(cam[0], axis=1), 1 / focal)
    assert np.allclose(np.diff(cam[1], axis=0), 1 / focal)
    assert np.allclose(cam[2], 1)


def fixed_camera(scene):
    """The scene seen by one camera for all images: level, looking down
    the room, 64 degrees wide, centred, 1.3 m above the floor (the boxes
    moved with the floor)."""
    drop = 1.3 - scene['cam_h']
    boxes = [dict(lo=(b['lo'][0], b['lo'][1] + drop, b['lo'][2]),
                  hi=(b['hi'][0], b['hi'][1] + drop, b['hi'][2]))
             for b in scene['boxes']]
    return dict(scene, cam_h=1.3, yaw=0., pitch=0., roll=0.,
                fov=np.radians(64), centre=np.array([0.5, 0.5]),
                boxes=boxes)


def test_position_prior_is_about_the_constant(tmp_path):
    """64 training / 48 validation rooms at 32 px, the Eigen crop: the
    per-pixel mean of the training depths scores within 5 points of d1 of
    the training mean (and no better RMSE than 90% of it); the same rooms
    from a fixed camera give the prior a lead of more than 10 points."""
    size, settings = 32, dict(crop_type='nyu_crop')
    root = make_mini_nyu(str(tmp_path / 'nyu'), num_train=64, num_val=48,
                         img_size=size)
    depths = {}
    for split in ('train', 'test'):
        _, depths[split] = depth_data(dict(
            type='NYUDataset', data_root=root,
            data_prefix=dict(img_path=f'images/{split}',
                             depth_map_path=f'annotations/{split}')), size)
    constant = depth_constant_baseline(depths['train'], depths['test'],
                                       **settings)
    prior = depth_prior_baseline(depths['train'], depths['test'], **settings)
    assert prior['d1'] - constant['d1'] < 0.05
    assert prior['rmse'] > 0.9 * constant['rmse']

    fixed = {}
    for split, num in (('train', 64), ('test', 48)):
        maps = []
        for index in range(num):
            rng = _rng(0, _NYU, split == 'test', index)
            rng.integers(4)  # the room name
            maps.append(_scene_depth(fixed_camera(_sample_scene(rng)),
                                     size)[0])
        fixed[split] = torch.tensor(np.stack(maps), dtype=torch.float32)
    lead = (depth_prior_baseline(fixed['train'], fixed['test'],
                                 **settings)['d1'] -
            depth_constant_baseline(fixed['train'], fixed['test'],
                                    **settings)['d1'])
    assert lead > 0.1


def _depth_carrying(depth, generator):
    """Features ``(N, 32, h, w)`` of depths ``(N, H, W)`` that carry each
    8 x 8 patch's depth: its mean depth and mean log depth (standardised
    over the set) among 30 noise channels."""
    patch = torch.stack([
        torch.nn.functional.avg_pool2d(d[:, None], 8)[:, 0]
        for d in (depth, depth.clamp(min=1e-3).log())], 1)
    patch = (patch - patch.mean((0, 2, 3), keepdim=True)) / patch.std(
        (0, 2, 3), keepdim=True)
    return torch.cat([patch, torch.randn(len(depth), 30, *patch.shape[2:],
                                         generator=generator)], 1)


def test_shipped_mini_probe_reads_depth_the_features_carry(tmp_path):
    """The mini probe's own settings (configs/dense_probes/depth_mini-nyu.py)
    fit on features that carry each patch's depth (mean depth and mean log
    depth of the 8 x 8 patch, among 30 noise channels) beat the image-free
    prior by far: the probe can show what a backbone's features hold."""
    from mmengine.config import Config

    from mmpos.evaluation.dense import probe_settings
    from mmpos.evaluation.depth_probe import (DEPTH_PROBE, FIT_KEYS,
                                              HEAD_KEYS, depth_eval_settings,
                                              run_depth_probe)
    cfg = Config.fromfile('configs/dense_probes/depth_mini-nyu.py')
    settings = probe_settings(cfg, 'depth_probe', DEPTH_PROBE)
    evaluation = depth_eval_settings(cfg)
    size = 32
    root = make_mini_nyu(str(tmp_path / 'nyu'), num_train=64, num_val=48,
                         img_size=size)
    g = torch.Generator().manual_seed(0)
    data = {}
    for split in ('train', 'test'):
        _, depth = depth_data(dict(
            type='NYUDataset', data_root=root,
            data_prefix=dict(img_path=f'images/{split}',
                             depth_map_path=f'annotations/{split}')), size)
        patch = _depth_carrying(depth, g)
        data[split] = (dict(patch=[patch], cls=[torch.zeros(len(depth), 32)]),
                       depth)
    metrics, _ = run_depth_probe(
        *data['train'], *data['test'], seed=0,
        cls_token=settings['cls_token'],
        **{k: settings[k] for k in HEAD_KEYS + FIT_KEYS}, **evaluation)
    prior = depth_prior_baseline(data['train'][1], data['test'][1],
                                 **evaluation)
    assert metrics['d1'] > prior['d1'] + 0.15, (metrics, prior)
    assert metrics['rmse'] < 0.7 * prior['rmse']


def _mini_probe(train, test):
    """The method ranking's depth probe settings
    (configs/dense_probes/depth_mini-nyu.py) fit on ``(features, depths)``
    pairs; its metrics and the image-free prior's."""
    from mmengine.config import Config

    from mmpos.evaluation.dense import probe_settings
    from mmpos.evaluation.depth_probe import (DEPTH_PROBE, FIT_KEYS,
                                              HEAD_KEYS, depth_eval_settings,
                                              run_depth_probe)
    cfg = Config.fromfile('configs/dense_probes/depth_mini-nyu.py')
    settings = probe_settings(cfg, 'depth_probe', DEPTH_PROBE)
    evaluation = depth_eval_settings(cfg)
    metrics, _ = run_depth_probe(
        *train, *test, seed=0, cls_token=settings['cls_token'],
        **{k: settings[k] for k in HEAD_KEYS + FIT_KEYS}, **evaluation)
    return metrics, depth_prior_baseline(train[1], test[1], **evaluation)


def test_layers_depth_is_read_from_content_not_position_or_pixels(tmp_path):
    """mini-NYU layers, 64 training / 48 validation scenes at 32 px: the
    per-pixel prior is no better than the constant (position says
    nothing), and δ1 up to each image's scale (si_d1, the ranking's metric)
    of the shipped mini probe is far higher on features that carry each
    patch's depth (an oracle reading the image: its mean depth and mean
    log depth, among 30 noise channels) than on the raw pixels (the
    patches' pixels, PixelPatches) and the prior; the raw pixels are not
    far above the prior (the image's colour and a pixel's position carry
    no depth)."""
    from mmpos.apis.features import data_mean_std
    from mmpos.evaluation.dense import dense_features
    from mmpos.evaluation.frozen import load_inputs
    from mmpos.models.backbones import PixelPatches
    from mmpos_harness.comparison.runs import PROBE_CONFIG
    size = 32
    root = make_mini_layers(str(tmp_path / 'layers'), num_train=64,
                            num_val=48, img_size=size)
    g = torch.Generator().manual_seed(0)
    pixels = PixelPatches(8).eval()
    oracle, raw = {}, {}
    for split in ('train', 'test'):
        paths, depth = depth_data(dict(
            type='NYUDataset', data_root=root,
            data_prefix=dict(img_path=f'images/{split}',
                             depth_map_path=f'annotations/{split}')), size)
        patch = _depth_carrying(depth, g)
        oracle[split] = (dict(patch=[patch], cls=[patch.mean((2, 3))]),
                         depth)
        images = load_inputs(paths, size, *data_mean_std(PROBE_CONFIG))
        raw[split] = (dense_features(pixels, images), depth)
    read, prior = _mini_probe(oracle['train'], oracle['test'])
    seen, _ = _mini_probe(raw['train'], raw['test'])
    constant = depth_constant_baseline(*(oracle[split][1] for split in (
        'train', 'test')), crop_type='nyu_crop')
    # measured: oracle 61.2, raw pixels 36.2, prior 35.2, constant 33.7
    assert abs(prior['si_d1'] - constant['si_d1']) < 0.05
    assert read['si_d1'] > prior['si_d1'] + 0.2
    assert read['si_d1'] > seen['si_d1'] + 0.2
    assert seen['si_d1'] < prior['si_d1'] + 0.05
