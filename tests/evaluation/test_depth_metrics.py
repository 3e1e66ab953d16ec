"""The depth metrics against a re-implementation of the authors' evaluation
(DINOv3's ``eval/depth/eval.py`` loop, ``datasets_utils.make_valid_mask``
and ``metrics.calculate_depth_metrics``; the same formulas as Li et al.'s
toolbox), on fixtures with invalid depth, depth beyond the maximum,
predictions outside the range, an all-invalid image and the Eigen crop at
several sizes; the mmengine metric; the image-free baselines; δ1 up to
each image's scale (``si_d1``)."""
import math
import warnings

import numpy as np
import pytest
import torch

from mmpos.evaluation.depth_probe import (DEPTH_METRICS, DinoDepthMetric,
                                          depth_constant_baseline,
                                          depth_eval_mask, depth_metrics,
                                          depth_prior_baseline,
                                          eigen_crop_box,
                                          probe_depth_metrics,
                                          scale_aligned_d1)
from mmpos.errors import BadInputError

# the reference's metric names -> ours
NAMES = dict(a1='d1', a2='d2', a3='d3', abs_rel='abs_rel', sq_rel='sq_rel',
             rmse='rmse', rmse_log='rmse_log', log_10='log10', silog='silog')


def reference_image(pred, gt, lo, hi, eigen):
    """One image as DINOv3's eval loop scores it (numpy, float64)."""
    gt = np.where((gt >= hi) | (gt <= lo), 0., gt)  # out of range: ignored
    h, w = gt.shape
    mask = np.zeros((h, w), bool)
    if eigen:
        mask[int((45 / 480) * h):int((471 / 480) * h),
             int((41 / 640) * w):int((601 / 640) * w)] = True
    else:
        mask[:] = True
    mask &= gt != 0
    pred = np.clip(pred, lo, hi)
    g, p = gt[mask], pred[mask]
    with np.errstate(invalid='ignore', divide='ignore'), \
            warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)  # empty means: NaN
        thresh = np.maximum(g / p, p / g)
        err = g - p
        err_log = np.log(g) - np.log(p)
        out = dict(
            a1=np.mean(thresh < 1.25), a2=np.mean(thresh < 1.25**2),
            a3=np.mean(thresh < 1.25**3), abs_rel=np.mean(np.abs(err) / g),
            sq_rel=np.mean(err**2 / g), rmse=np.sqrt(np.mean(err**2)),
            rmse_log=np.sqrt(np.mean(err_log**2)),
            log_10=np.mean(np.abs(np.log10(g) - np.log10(p))))
        silog = np.sqrt(np.mean(err_log**2) - np.mean(err_log)**2) * 100
    out['silog'] = 0. if np.isnan(silog) else silog
    return out


def reference(pred, gt, lo=1e-3, hi=10., eigen=False):
    """NaN-mean over images of :func:`reference_image`, our names."""
    per = [reference_image(p, g, lo, hi, eigen)
           for p, g in zip(pred.double().numpy(), gt.double().numpy())]
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)
        return {NAMES[k]: float(np.nanmean([m[k] for m in per]))
                for k in NAMES}


def fixtures(h=24, w=32):
    """Four images: invalid (0) pixels and depths at / beyond 10 m; a
    prediction outside [1e-3, 10] m; an all-invalid image; a plain one."""
    g = torch.Generator().manual_seed(0)
    gt = torch.rand(4, h, w, generator=g) * 11 + 0.2
    gt[0, :3] = 0
    gt[0, 5, :4] = 10.  # the maximum itself is out
    pred = gt * torch.exp(0.3 * torch.randn(4, h, w, generator=g))
    pred[1, :2] = 0.  # clamped to 1e-3
    pred[1, 2, :5] = 30.  # clamped to 10
    gt[2] = torch.where(torch.rand(h, w, generator=g) < 0.5, 0., 12.)
    return pred, gt


@pytest.mark.parametrize('crop', [None, 'nyu_crop'])
def test_metrics_match_the_reference(crop):
    pred, gt = fixtures()
    keep = [0, 1, 3]  # without the all-invalid image
    ours = depth_metrics(pred, gt, 1e-3, 10., crop)
    ref = reference(pred[keep], gt[keep], eigen=crop == 'nyu_crop')
    assert set(ours) == set(DEPTH_METRICS) == set(ref)
    for key in DEPTH_METRICS:
        assert ours[key] == pytest.approx(ref[key], rel=1e-9, abs=1e-12)
    # an all-invalid image is left out of every metric; the reference
    # leaves it out of all but silog, which it counts as 0
    ref_all = reference(pred, gt, eigen=crop == 'nyu_crop')
    for key in set(DEPTH_METRICS) - {'silog'}:
        assert ours[key] == pytest.approx(ref_all[key], rel=1e-9)
    assert ref_all['silog'] == pytest.approx(ours['silog'] * 3 / 4)


def test_ranges_and_clamp():
    """Depth at or beyond max and invalid (0) ground truth are not scored;
    predictions are clamped into the range before scoring."""
    gt = torch.full((1, 4, 4), 2.)
    gt[0, 0] = torch.tensor([0., 1e-3, 10., 11.])
    pred = gt.clone()
    pred[0, 0] = 5.  # errors on pixels that are not scored
    assert depth_metrics(pred, gt)['rmse'] == 0
    assert depth_eval_mask(gt).sum() == 12
    far = torch.full((1, 2, 2), 8.)
    assert depth_metrics(torch.full_like(far, 50.), far)['rmse'] == \
        pytest.approx(2.)  # 50 m -> 10 m
    assert depth_metrics(torch.zeros_like(far), far)['abs_rel'] == \
        pytest.approx((8 - 1e-3) / 8)  # 0 m -> 1e-3 m


def test_eigen_crop_box_scales_to_the_map():
    """At 480 x 640 the Eigen crop (rows 45:471, columns 41:601, as mmseg's
    fixed box); on other sizes each bound is int(bound / 480 * H) or
    int(bound / 640 * W), DINOv3's scaling (mmseg keeps the fixed pixel
    indices, which at 64 x 64 leave rows 45:64, columns 41:64)."""
    assert eigen_crop_box(480, 640) == (45, 471, 41, 601)
    assert eigen_crop_box(64, 64) == (6, 62, 4, 60)
    for h, w in ((32, 32), (240, 320), (416, 544), (476, 630)):
        assert eigen_crop_box(h, w) == (
            int(45 / 480 * h), int(471 / 480 * h), int(41 / 640 * w),
            int(601 / 640 * w))
    from mmseg.evaluation.metrics import DepthMetric
    full = torch.full((480, 640), 5.)
    mmseg_mask = DepthMetric(crop_type='nyu_crop')._get_eval_mask(full)
    assert torch.equal(depth_eval_mask(full, crop_type='nyu_crop'),
                       mmseg_mask)
    mask = depth_eval_mask(torch.full((2, 64, 64), 5.), crop_type='nyu_crop')
    assert mask.shape == (2, 64, 64) and mask.sum() == 2 * 56 * 56
    assert mask[:, 6:62, 4:60].all()
    # an error outside the crop counts without it only
    gt = torch.full((1, 64, 64), 5.)
    pred = gt.clone()
    pred[0, :6] = 9.
    assert depth_metrics(pred, gt, crop_type='nyu_crop')['rmse'] == 0
    assert depth_metrics(pred, gt)['rmse'] > 0
    with pytest.raises(BadInputError, match='crop_type'):
        depth_metrics(pred, gt, crop_type='garg_crop')


def test_no_valid_pixel_is_an_error():
    gt = torch.zeros(2, 8, 8)
    gt[1] = 20.  # beyond max
    with pytest.raises(BadInputError, match='no evaluated depth pixel'):
        depth_metrics(torch.ones_like(gt), gt)
    with pytest.raises(BadInputError, match=r'\(N, H, W\)'):
        depth_metrics(torch.ones(8, 8), torch.ones(8, 8))


def test_mmengine_metric_builds_from_the_probe_config():
    """configs/dense_probes/depth_*: the val_evaluator is DinoDepthMetric
    (built by mmseg's registry, as mmseg's DepthEstimator runs it) and
    gives :func:`depth_metrics` of the samples it is fed."""
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmseg.registry import METRICS

    from conftest import REPO
    cfg = Config.fromfile(REPO / 'configs/dense_probes/'
                          'depth_estimator_vit-tiny-rope-mixed_mini-nyu.py')
    init_default_scope('mmseg')
    metric = METRICS.build(cfg.val_evaluator)
    assert isinstance(metric, DinoDepthMetric)
    pred, gt = fixtures(64, 64)
    metric.process({}, [dict(pred_depth_map=dict(data=p[None]),
                             gt_depth_map=dict(data=g[None]))
                        for p, g in zip(pred, gt)])
    assert metric.evaluate(len(pred)) == depth_metrics(
        pred, gt, crop_type='nyu_crop')


def test_constant_baseline_is_the_training_mean():
    g = torch.Generator().manual_seed(1)
    train = torch.rand(5, 6, 8, generator=g) * 8 + 1
    train[0, 0] = 0.  # invalid
    train[1, 1] = 12.  # beyond max
    val = torch.rand(3, 6, 8, generator=g) * 8 + 1
    valid = (train > 0) & (train < 10)
    mean = train[valid].double().mean().item()
    assert depth_constant_baseline(train, val) == probe_depth_metrics(
        torch.full_like(val, mean), val)


def test_prior_baseline_is_the_per_pixel_training_mean():
    """Mean over the training images in which the pixel is evaluated; a
    pixel evaluated in none (here: the corner) gets the mean of all
    evaluated training pixels."""
    g = torch.Generator().manual_seed(2)
    train = torch.rand(4, 6, 8, generator=g) * 8 + 1
    train[:2, 2, 3] = 0.
    train[:, 0, 0] = 0.
    val = torch.rand(3, 6, 8, generator=g) * 8 + 1
    prior = torch.zeros(6, 8, dtype=torch.float64)
    for r in range(6):
        for c in range(8):
            values = [t[r, c].item() for t in train if t[r, c] > 0]
            prior[r, c] = np.mean(values) if values else math.nan
    prior[0, 0] = train[train > 0].double().mean()
    expected = probe_depth_metrics(prior.float().expand_as(val), val)
    ours = depth_prior_baseline(train, val)
    assert ours == pytest.approx(expected, rel=1e-6)
    with pytest.raises(BadInputError, match='one H, W'):
        depth_prior_baseline(train[:, :5], val)
    with pytest.raises(BadInputError, match='no training depth'):
        depth_constant_baseline(torch.zeros_like(train), val)


def test_depth_run_reports_the_baselines(dense_mini):
    """dense_suite.depth_run: beside the probe's metrics, the constant and
    per-pixel prior of the same training and validation depths, scored with
    the probe config's evaluation settings (the Eigen crop here)."""
    from mmengine.config import Config

    from conftest import REPO
    from mmpos.evaluation.dense_suite import depth_run, probed_backbone
    from mmpos.evaluation.depth_probe import depth_split
    demo = str(REPO / 'configs/demo/droppos_vit-tiny-rope-mixed_mini.py')
    cfg = Config.fromfile(REPO / 'configs/dense_probes/depth_mini-nyu.py')
    backbone = probed_backbone('depth', cfg, demo, None)
    root = str(dense_mini / 'nyu')
    metrics, details = depth_run(cfg, backbone, [128.] * 3, [64.] * 3,
                                 data_root=root, iters=2)
    assert set(metrics) == {*DEPTH_METRICS, 'si_d1'}
    _, train = depth_split(cfg, 'train', 64, root)
    for name, fn in (('constant', depth_constant_baseline),
                     ('prior', depth_prior_baseline)):
        assert details['baselines'][name] == fn(train, details['gt'],
                                                crop_type='nyu_crop')


def test_scale_aligned_d1_scores_depth_up_to_each_images_scale():
    """si_d1: each image's prediction scaled to the true depth's geometric
    mean over its evaluated pixels, then d1. A prediction right up to a
    per-image factor scores 1 (its d1 is 0 here); any per-image factor
    leaves it as it is; a prediction whose geometric mean is already the
    truth's scores its d1; a constant scores the share of pixels within
    1.25 of the image's geometric mean; invalid pixels are left out as by
    depth_metrics; probe_depth_metrics reports it beside depth_metrics."""
    g = torch.Generator().manual_seed(3)
    gt = torch.rand(4, 6, 8, generator=g) * 7 + 1
    gt[0, 0, :3] = 0.  # invalid
    scale = torch.tensor([0.3, 0.7, 0.5, 0.1])[:, None, None]  # in range
    assert scale_aligned_d1(gt * scale, gt) == pytest.approx(1.0)
    assert depth_metrics(gt * scale, gt)['d1'] == 0.
    pred = gt * (0.8 + 0.4 * torch.rand(4, 6, 8, generator=g))
    assert scale_aligned_d1(pred * scale, gt) == pytest.approx(
        scale_aligned_d1(pred, gt))
    valid = gt > 0
    centred = torch.stack([
        p * (t[m].log().mean() - p[m].log().mean()).exp()
        for p, t, m in zip(pred.double(), gt.double(), valid)])
    assert scale_aligned_d1(pred, gt) == pytest.approx(
        depth_metrics(centred.float(), gt)['d1'], abs=1e-6)
    shares = [((t[m] / t[m].log().mean().exp()).log().abs() <
               math.log(1.25)).double().mean().item()
              for t, m in zip(gt.double(), valid)]
    assert scale_aligned_d1(torch.full_like(gt, 3.), gt) == pytest.approx(
        np.mean(shares))
    both = probe_depth_metrics(pred, gt, crop_type='nyu_crop')
    assert both == dict(depth_metrics(pred, gt, crop_type='nyu_crop'),
                        si_d1=scale_aligned_d1(pred, gt,
                                               crop_type='nyu_crop'))
    with pytest.raises(BadInputError, match='no evaluated depth pixel'):
        scale_aligned_d1(pred, torch.zeros_like(gt))
