"""The linear depth probe (DINOv2 protocol): mmseg's DepthMetric, DINOv2's
bins / normalisation / SigLoss, a probe that learns depth when the features
carry it, mini-NYU's exact depth maps, and the tool end to end."""
import json
import math

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.structures import PixelData
from mmseg.evaluation.metrics import DepthMetric
from mmseg.structures import SegDataSample

from conftest import REPO
from mmpos.evaluation.depth_probe import (LinearDepthHead, SigLoss,
                                          bin_probabilities, depth_bins,
                                          depth_data, depth_metrics,
                                          run_depth_probe)
from conftest import load_tool

DEMO = 'configs/demo/droppos_vit-tiny-rope-mixed_mini.py'


def test_depth_metrics_agree_with_mmseg_where_the_protocols_agree():
    """Predictions inside [1e-3, 10] m, no crop, every image with valid
    pixels: mmseg's DepthMetric gives the same d1 ... log10 (its silog is
    another formula: 0.5 instead of 1 times mean(g)^2, no factor 100)."""
    g = torch.Generator().manual_seed(0)
    gt = torch.rand(3, 12, 16, generator=g) * 9 + 0.5
    gt[0, :2] = 0  # invalid pixels are left out
    pred = gt * (1 + 0.3 * torch.randn(3, 12, 16, generator=g)).abs()
    pred = pred.clamp(1e-3, 10.)
    ours = depth_metrics(pred, gt, 1e-3, 10.)
    metric = DepthMetric(min_depth_eval=1e-3, max_depth_eval=10.)
    samples = []
    for p, t in zip(pred, gt):
        sample = SegDataSample()
        sample.pred_depth_map = PixelData(data=p[None])
        sample.gt_depth_map = PixelData(data=t[None])
        samples.append(sample.to_dict())
    metric.process({}, samples)
    theirs = metric.compute_metrics(metric.results)
    assert set(ours) == set(theirs)
    for key in set(ours) - {'silog'}:
        assert ours[key] == pytest.approx(theirs[key], rel=1e-5, abs=1e-7)
    # by hand: 1.5 times the true depth everywhere (all below 10 m)
    near = gt[1:] * 0.6
    scaled = depth_metrics(near * 1.5, near)
    assert scaled['abs_rel'] == pytest.approx(0.5)
    assert scaled['d1'] == 0 and scaled['d2'] == 1  # 1.25 < 1.5 < 1.25^2
    rmse = np.mean([t.pow(2).mean().sqrt().item() for t in near])
    assert scaled['rmse'] == pytest.approx(0.5 * rmse, rel=1e-5)
    assert scaled['silog'] == pytest.approx(0, abs=1e-4)  # scale-invariant


def test_bins_and_normalisation():
    assert torch.allclose(depth_bins(1e-3, 10., 256, 'UD'),
                          torch.linspace(1e-3, 10., 256))
    sid = depth_bins(0.5, 8., 5, 'SID')  # log-uniform: constant ratio 2
    assert torch.allclose(sid, torch.tensor([0.5, 1., 2., 4., 8.]))
    logits = torch.tensor([-1., 0.9, 0.4])[None, :, None, None]
    # AdaBins' linear normalisation: (relu(l) + 0.1) / sum
    expected = torch.tensor([0.1, 1.0, 0.5]) / 1.6
    assert torch.allclose(bin_probabilities(logits)[0, :, 0, 0], expected)


def test_head_is_dinov2s_linear_head():
    torch.manual_seed(0)
    head = LinearDepthHead(in_channels=2 * 6, num_inputs=2, n_bins=8,
                           min_depth=1., max_depth=8.)
    patches = [torch.randn(2, 6, 3, 5) for _ in range(2)]
    cls = [torch.randn(2, 6) for _ in range(2)]
    depth = head(list(zip(patches, cls)))
    assert depth.shape == (2, 1, 12, 20)  # x4 bilinear upsampling
    # by hand: concat class token, upsample, concat blocks, 1x1 conv,
    # (relu + 0.1) normalisation, expectation over the bins
    maps = [torch.nn.functional.interpolate(
        torch.cat([p, c[:, :, None, None].expand_as(p)], 1), size=(12, 20),
        mode='bilinear', align_corners=False) for p, c in zip(patches, cls)]
    logits = head.conv_seg(torch.cat(maps, 1))
    probs = (logits.relu() + 0.1) / (logits.relu() + 0.1).sum(1, True)
    expected = (probs * torch.linspace(1., 8., 8)[:, None, None]).sum(1)
    assert torch.allclose(depth[:, 0], expected, atol=1e-6)
    assert ((depth >= 1.) & (depth <= 8.)).all()


def test_sigloss_is_dinov2s():
    gt = torch.rand(2, 1, 8, 8) * 5 + 1
    loss = SigLoss()
    assert loss(gt, gt).item() == pytest.approx(0., abs=1e-6)
    # a pure scale error c costs sqrt(0.15) |log c| (lambda = 0.85)
    scaled = (gt + 1e-3) * 1.5 - 1e-3
    assert loss(scaled, gt).item() == pytest.approx(
        math.sqrt(0.15) * math.log(1.5), rel=1e-4)
    pred = gt * torch.exp(0.2 * torch.randn_like(gt))
    g = (pred + 1e-3).log() - (gt + 1e-3).log()
    assert loss(pred, gt).item() == pytest.approx(
        (g.var() + 0.15 * g.mean() ** 2).sqrt().item(), rel=1e-5)


def test_probe_learns_depth_carried_by_the_features():
    """Features whose first channel is the scene's depth: the trained
    probe predicts depth well; features of noise do not."""
    g = torch.Generator().manual_seed(0)
    depth = (torch.rand(24, 1, 1, generator=g) * 6 + 2).expand(24, 8, 8)
    noise = torch.randn(24, 7, 2, 2, generator=g)
    informative = torch.cat([depth[:, None, ::4, ::4] / 4, noise], 1)
    cls = torch.zeros(24, 8)
    results = {}
    for name, feats in (('depth', informative),
                        ('noise', torch.randn(24, 8, 2, 2, generator=g))):
        tr, va = (dict(patch=[feats[s]], cls=[cls[s]])
                  for s in (slice(0, 16), slice(16, 24)))
        metrics, pred = run_depth_probe(tr, depth[:16], va, depth[16:],
                                        iters=150, lr=2e-2, n_bins=64)
        assert pred.shape == (8, 8, 8)
        results[name] = metrics
    assert results['depth']['abs_rel'] < 0.1 < results['noise']['abs_rel']
    assert results['depth']['d1'] > 0.9


def test_mini_nyu_depth_is_exact(dense_mini):
    """The depth PNGs (read by mmseg's NYUDataset + LoadDepthAnnotation)
    are the analytic z-depth of the scene to the millimetre: each pixel's
    depth times its ray lands on the surface it names (floor at ``y =
    cam_h``, walls, box faces), and the optical axis is the ray's
    camera-frame z."""
    from mmpos_harness.mini_data._io import _rng
    from mmpos_harness.mini_data.depth import (_NYU, BACK, BOX, CEILING,
                                               FLOOR, FRONT, LEFT, RIGHT,
                                               ROOMS, _rays, _rotation,
                                               _sample_scene, _scene_depth)
    dataset = dict(type='NYUDataset', data_root=str(dense_mini / 'nyu'),
                   data_prefix=dict(img_path='images/train',
                                    depth_map_path='annotations/train'))
    paths, depths = depth_data(dataset, 32)
    assert len(paths) == 6
    marker = json.load(open(dense_mini / 'nyu' / '.mini_data.json'))
    for index in range(6):
        rng = _rng(marker['seed'], _NYU, False, index)
        room = ROOMS[int(rng.integers(len(ROOMS)))]
        scene = _sample_scene(rng)
        path = next(p for p in paths if p.endswith(f'{index + 1:05d}.jpg'))
        assert path.split('/')[-1].startswith(room)
        truth, surface = _scene_depth(scene, 32)
        read = depths[paths.index(path)].numpy()
        assert np.abs(read - truth).max() <= 5e-4 + 1e-6
        rays = _rays(scene, 32)
        rot = _rotation(scene['yaw'], scene['pitch'], scene['roll'])
        assert np.allclose(np.einsum('ji,jhw->ihw', rot, rays)[2], 1)
        x, y, z = rays * truth
        planes = {FLOOR: (y, scene['cam_h']),
                  CEILING: (y, scene['cam_h'] - scene['room_h']),
                  LEFT: (x, scene['left']), RIGHT: (x, scene['right']),
                  BACK: (z, scene['back']), FRONT: (z, scene['front'])}
        for sid, (coord, value) in planes.items():
            assert np.allclose(coord[surface == sid], value)
        for i, box in enumerate(scene['boxes']):
            hit = surface == BOX + i
            p = np.stack([x[hit], y[hit], z[hit]])
            lo, hi = (np.array(box[k])[:, None] for k in ('lo', 'hi'))
            assert ((p >= lo - 1e-9) & (p <= hi + 1e-9)).all()
            gap = np.minimum(np.abs(p - lo), np.abs(p - hi)).min(0)
            assert np.allclose(gap, 0, atol=1e-9)  # on a face


@pytest.mark.parametrize('size', [[], ['--max-tokens', '4']])  # NaFlex
def test_depth_tool_end_to_end(dense_mini, tmp_path, capsys, size):
    """The tool writes its metrics and pictures and shows the head's
    training as mmengine's progress bar (#58: a run of minutes talks)."""
    probe = REPO / 'configs/dense_probes/depth_mini-nyu.py'
    assert Config.fromfile(probe).val_evaluator.crop_type == 'nyu_crop'
    load_tool('depth_probe').main([
          str(REPO / DEMO), 'none', '--probe', str(probe), '--data-root',
          str(dense_mini / 'nyu'), '--work-dir', str(tmp_path), '--iters',
          '20', '--pictures', '2', *size])
    metrics = json.load(open(tmp_path / 'metrics.json'))
    assert {'depth/rmse', 'depth/abs_rel', 'depth/d1'} <= set(metrics)
    assert 0 <= metrics['depth/d1'] <= 1 and metrics['depth/rmse'] > 0
    assert ('max_tokens' in (tmp_path / 'result.md').read_text()) == bool(
        size)
    assert (tmp_path / 'depth_pictures.png').stat().st_size < 200_000
    assert '] 20/20, ' in capsys.readouterr().out


def test_depth_estimator_config_trains(dense_mini):
    """configs/dense_probes/depth_estimator_*: mmseg's DepthEstimator with
    the frozen backbone and LinearDepthHead reads mini-NYU through its own
    pipeline, its SigLoss falls under AdamW on the head, and it predicts
    depth maps of the image size within the bins' range."""
    from mmengine.dataset import Compose, pseudo_collate
    from mmengine.registry import init_default_scope
    from mmengine.utils import import_modules_from_strings
    from mmseg.registry import DATASETS, MODELS
    cfg = Config.fromfile(REPO / 'configs/dense_probes/'
                          'depth_estimator_vit-tiny-rope-mixed_mini-nyu.py')
    import_modules_from_strings(**cfg.custom_imports)
    init_default_scope('mmseg')
    cfg.model.data_preprocessor.size = (32, 32)
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    dataset = DATASETS.build(dict(cfg.train_dataloader.dataset,
                                  data_root=str(dense_mini / 'nyu')))
    batch = model.data_preprocessor(pseudo_collate(
        [dataset[i] for i in range(6)]), True)
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert trainable and all(
        p is q for p, q in zip(trainable, model.decode_head.parameters()))
    optim = torch.optim.AdamW(trainable, lr=1e-2)
    losses = []
    for _ in range(15):
        loss = model(**batch, mode='loss')['decode.loss_sig']
        optim.zero_grad()
        loss.backward()
        optim.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]
    test = Compose(cfg.test_pipeline)
    sample = test(dict(dataset.get_data_info(0)))
    model.eval()
    with torch.no_grad():
        out = model.test_step(pseudo_collate([sample]))[0]
    depth = out.pred_depth_map.data
    assert depth.shape == (1, 32, 32)
    assert ((depth >= 1e-3) & (depth <= 10.)).all()


# NaFlex: each image at its aspect ratio within a token budget
NAFLEX_SHAPES = [(40, 120), (96, 32), (64, 64), (50, 70)]  # (H, W) pixels
MEAN, STD = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]


def naflex_backbone(**kwargs):
    from mmpos.models.backbones import RoPEVisionTransformer
    torch.manual_seed(0)
    model = RoPEVisionTransformer(
        arch=dict(embed_dims=32, num_layers=2, num_heads=2,
                  feedforward_channels=64), patch_size=8, img_size=32,
        rope=dict(type='mixed'), use_ape=True, num_register_tokens=1,
        out_type='raw', **kwargs)
    model.init_weights()
    return model.eval()


def nyu_folder(root, shapes):
    """A depth probe config on an mmseg ``NYUDataset`` of random images and
    smooth depths (uint16 mm) of the given sizes, the same files in the
    ``train`` and ``test`` splits."""
    from PIL import Image
    g = np.random.default_rng(0)
    for split in ('train', 'test'):
        for folder in ('images', 'annotations'):
            (root / folder / split).mkdir(parents=True)
        for i, (h, w) in enumerate(shapes):
            Image.fromarray(g.integers(0, 256, (h, w, 3), dtype=np.uint8)
                            ).save(root / 'images' / split / f'r_{i}.jpg')
            y, x = np.mgrid[:h, :w]
            depth = 1 + 4 * (y / h) + 2 * np.sin(x / 7.) ** 2
            Image.fromarray(np.round(depth * 1000).astype(np.uint16)).save(
                root / 'annotations' / split / f'r_{i}.png')
    cfg = Config.fromfile(REPO / 'configs/dense_probes/depth_mini-nyu.py')
    cfg.merge_from_dict(dict(depth_probe=dict(size=32, iters=5, lr=1e-2,
                                              batch_size=3)))
    return cfg, str(root)


def test_naflex_depth_losses_pool_the_batchs_pixels():
    """Mixed sizes: SigLoss over every image's pixels together (its
    prediction upsampled to its own depth map); one size: the batch
    loss of depth_losses."""
    torch.manual_seed(0)
    head = LinearDepthHead(in_channels=4, n_bins=8)
    preds = [torch.rand(1, 1, 3, 5) + 1, torch.rand(1, 1, 4, 2) + 1]
    gts = [torch.rand(12, 20) * 5, torch.rand(16, 8) * 5]
    loss = head.depth_losses_maps(preds, gts)['loss_sig']
    up = [torch.nn.functional.interpolate(p, size=g.shape, mode='bilinear',
                                          align_corners=False).flatten()
          for p, g in zip(preds, gts)]
    assert torch.allclose(loss, SigLoss()(torch.cat(up), torch.cat(
        [g.flatten() for g in gts])))
    same = torch.rand(2, 1, 3, 5) + 1, torch.rand(2, 1, 12, 20) * 5
    assert torch.allclose(head.depth_losses_maps(
        list(same[0].split(1)), list(same[1][:, 0]))['loss_sig'],
        head.depth_losses(*same)['loss_sig'])


def test_naflex_depth_of_a_mixed_batch_is_each_image_alone(tmp_path):
    """Every image of a padded batch of four aspect ratios gets the
    features and predicted depth it gets alone (batch of 1), at its NaFlex
    size (its grid times the patch, its depth map resized to it)."""
    from mmpos.datasets.transforms import naflex_size
    from mmpos.evaluation.dense_suite import depth_run
    cfg, root = nyu_folder(tmp_path, NAFLEX_SHAPES)
    model = naflex_backbone()
    runs = [depth_run(cfg, model, MEAN, STD, data_root=root,
                      batch_size=size, max_tokens=24) for size in (4, 1)]
    (metrics, details), (alone, one) = runs
    sizes = [tuple(d.shape) for d in details['gt']]
    assert sizes == [naflex_size(hw, 8, 24) for hw in NAFLEX_SHAPES]
    assert len(set(sizes)) == 4 and details['settings']['max_tokens'] == 24
    for a, b, gt in zip(details['pred'], one['pred'], details['gt']):
        assert a.shape == gt.shape
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert metrics == pytest.approx(alone, rel=1e-5)
    assert metrics == depth_metrics(details['pred'], details['gt'],
                                    crop_type='nyu_crop') | dict(
        si_d1=metrics['si_d1'])


def test_naflex_depth_on_squares_at_the_square_size_is_the_square(
        tmp_path):
    """Square images whose NaFlex size is the square size (32 px, 16
    patches of 8): the NaFlex probe gives the square probe's depths and
    metrics (fp32), and the same image-free baselines."""
    from mmpos.evaluation.dense_suite import depth_run
    cfg, root = nyu_folder(tmp_path, [(32, 32)] * 3)
    model = naflex_backbone(out_indices=(0, 1))
    square, sq = depth_run(cfg, model, MEAN, STD, data_root=root)
    naflex, nf = depth_run(cfg, model, MEAN, STD, data_root=root,
                           max_tokens=16)
    assert [tuple(p.shape) for p in nf['pred']] == [(32, 32)] * 3
    torch.testing.assert_close(torch.stack(nf['pred']), sq['pred'],
                               rtol=1e-5, atol=1e-5)
    assert all(torch.equal(a, b) for a, b in zip(nf['gt'], sq['gt']))
    assert naflex == pytest.approx(square, rel=1e-5)
    assert nf['baselines'] == sq['baselines']
