"""mini-SPair's cross-instance pairs: the rendered polygon is where the
keypoints say, the pairs hold two different instances with the same
semantic keypoints, SPair's difficulty keys follow their definitions, the
layout reads back, the output is deterministic, and the default test set
holds >= 2,000 keypoints."""
import inspect
import json
import os

import numpy as np
import pytest

from mmpos.evaluation.correspondence import read_spair_pairs
from mmpos_harness.mini_data import make_mini_spair
from mmpos_harness.mini_data import pairs as mini_pairs

SIZE = 64


@pytest.fixture(scope='module')
def spair(tmp_path_factory):
    root = tmp_path_factory.mktemp('mini_pairs') / 'spair'
    make_mini_spair(str(root), num_train=1, num_val=8, img_size=SIZE)
    return root


def _annotations(root):
    folder = root / 'PairAnnotation' / 'test'
    return [json.loads((folder / name).read_text())
            for name in sorted(os.listdir(folder))]


def _shoelace(poly):
    """Area and centroid of a simple polygon (K, 2)."""
    x, y = poly.T
    xn, yn = np.roll(x, -1), np.roll(y, -1)
    cross = x * yn - xn * y
    area = cross.sum() / 2
    return abs(area), np.array([((x + xn) * cross).sum(),
                                ((y + yn) * cross).sum()]) / (6 * area)


@pytest.mark.parametrize('category', mini_pairs.OBJECT_CATEGORIES)
def test_rendered_polygon_is_where_the_keypoints_say(category):
    for seed in range(3):
        poly, _, (matrix, offset) = mini_pairs._place_instance(
            np.random.default_rng(seed), category, SIZE)
        # the placement (which _paint inverts) maps the instance's template
        # vertices (its first 14 draws) onto the polygon
        template = mini_pairs._TEMPLATES[category](
            np.random.default_rng(seed).uniform(0, 1, 14))
        assert np.allclose(np.asarray(template) @ matrix + offset, poly)
        cover = mini_pairs._coverage(poly, SIZE).astype(np.float64)
        area, centroid = _shoelace(poly)
        ys, xs = np.mgrid[0:SIZE, 0:SIZE] + 0.5
        assert cover.sum() == pytest.approx(area, rel=0.005)
        assert np.abs(np.array([(cover * xs).sum(), (cover * ys).sum()]) /
                      cover.sum() - centroid).max() < 0.03


def _similarity_residual(src, trg):
    """RMS residual of the best rotation + scale + shift from src to trg."""
    a, b = (np.asarray(p) - np.mean(p, 0) for p in (src, trg))
    za, zb = a[:, 0] + 1j * a[:, 1], b[:, 0] + 1j * b[:, 1]
    scale = (np.conj(za) @ zb) / (np.conj(za) @ za)
    return float(np.sqrt(np.mean(np.abs(zb - scale * za)**2)))


def test_pairs_are_spair_like(spair):
    anns = _annotations(spair)
    pairs = read_spair_pairs(str(spair))
    assert [p['category'] for p in pairs] == [a['category'] for a in anns]
    residuals = []
    lo, hi = mini_pairs.MARGIN * SIZE, (1 - mini_pairs.MARGIN) * SIZE
    for index, ann in enumerate(anns):
        src, trg = np.array(ann['src_kps']), np.array(ann['trg_kps'])
        assert ((src >= lo) & (src <= hi) & (trg >= lo) & (trg <= hi)).all()
        assert ann['kps_ids'] == [str(i) for i in range(len(src))]
        sides = [max(b[2] - b[0], b[3] - b[1])
                 for b in (ann['src_bndbox'], ann['trg_bndbox'])]
        ratio = max(sides) / min(sides)
        assert ann['scale_variation'] == (0 if ratio < 1.25 else
                                          1 if ratio < 1.6 else 2)
        assert (ann['truncation'], ann['occlusion']) == (0, 0)
        if index % 4 == 0:
            assert ann['category'] == 'homography'
            assert len(src) == mini_pairs.NUM_KEYPOINTS
            assert ann['viewpoint_variation'] == 0
            continue
        assert ann['category'] in mini_pairs.OBJECT_CATEGORIES
        assert ann['mirror'] == 0
        assert len(src) == len(mini_pairs._TEMPLATES[ann['category']](
            np.zeros(14)))
        for kps, box in ((src, ann['src_bndbox']), (trg, ann['trg_bndbox'])):
            assert np.allclose([*kps.min(0), *kps.max(0)], box, atol=2e-3)
        turn = abs(ann['mini_rotation'][1] - ann['mini_rotation'][0])
        assert ann['viewpoint_variation'] == (0 if turn < 20 else
                                              1 if turn < 60 else 2)
        residuals.append(_similarity_residual(src, trg))
    # two instances: no rotation + scale + shift maps one onto the other
    assert len(residuals) == 6 and min(residuals) > 0.1
    assert np.mean(residuals) > 1.


def test_same_seed_same_bytes(spair, tmp_path):
    make_mini_spair(str(tmp_path / 'again'), num_train=1, num_val=8,
                    img_size=SIZE)
    for folder, _, files in os.walk(spair):
        for name in files:
            path = os.path.join(folder, name)
            other = tmp_path / 'again' / os.path.relpath(path, spair)
            assert other.read_bytes() == open(path, 'rb').read(), path


def test_default_test_set_holds_2000_keypoints():
    """By construction: a quarter geometric pairs of NUM_KEYPOINTS, the
    rest cross-instance pairs of at least the smallest template's
    vertices."""
    num = inspect.signature(make_mini_spair).parameters['num_val'].default
    geometric = len(range(0, num, mini_pairs.GEOMETRIC_EVERY))
    smallest = min(len(t(np.zeros(14)))
                   for t in mini_pairs._TEMPLATES.values())
    assert (geometric * mini_pairs.NUM_KEYPOINTS +
            (num - geometric) * smallest) >= 2000
