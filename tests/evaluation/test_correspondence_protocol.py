"""SPair-71k PCK as Probe3D reports it (per category, per
viewpoint-variation bin, averaged over categories), checked against a
re-implementation of the formula of Probe3D's
``evaluate_spair_correspondence.py`` on annotation files with the edge
cases: keypoints outside the image, keypoints missing in one image
(``null`` / ``[-1, -1]``), a category with pairs but no keypoint, a
requested category without pairs, a category of one keypoint, exact ties
at the threshold; and the identity baseline through the same code."""
import json
import math

import numpy as np
import pytest
import torch

from mmpos.evaluation.correspondence import (identity_baseline,
                                             read_spair_pairs, spair_pck)
from mmpos.errors import BadInputError

ALPHAS = (0.05, 0.1)


def _valid(kp):
    """Probe3D keeps a keypoint annotated (not ``null``) in both images;
    ``[-1, -1]`` is the other missing marker read_spair_pairs knows."""
    return kp is not None and list(kp) != [-1, -1]


def probe3d_reference(anns, full_preds, alpha, by='bbox'):
    """Probe3D (mbanani/probe3d at a1f1464), re-implemented on raw pair
    annotations: per category and viewpoint_variation in (0, 1, 2, all),
    recall = 100 x mean over the keypoints valid in both images of all
    the group's pairs of [error / max_idim / (max_bbox / max_idim) <
    alpha]; a group without pairs is N/A (-1); the reported number is the
    mean over categories of the valid entries. Probe3D's recall of a group
    with pairs but no keypoint is NaN, which then makes its mean NaN; here
    such a category is left out (mmpos' documented choice)."""
    cats = sorted({a['category'] for a in anns})
    table = {}
    for cat in cats:
        for vp in (0, 1, 2, None):
            chosen = [(a, p) for a, p in zip(anns, full_preds)
                      if a['category'] == cat
                      and vp in (None, a['viewpoint_variation'])]
            if not chosen:
                table[cat, vp] = -1.
                continue
            errors = []
            for ann, pred in chosen:
                max_idim = max(ann['trg_imsize'][:2])
                left, up, right, down = ann['trg_bndbox']
                scale = (max(right - left, down - up) / max_idim
                         if by == 'bbox' else 1.)
                for src, trg, guess in zip(ann['src_kps'], ann['trg_kps'],
                                           pred):
                    if _valid(src) and _valid(trg):
                        error = math.hypot(guess[0] - trg[0],
                                           guess[1] - trg[1]) / max_idim
                        errors.append(error / scale)
            table[cat, vp] = (100. * float(np.mean(np.array(errors) < alpha))
                              if errors else float('nan'))
    means = {}
    for vp in (0, 1, 2, None):
        values = [table[c, vp] for c in cats if table[c, vp] >= 0]
        means[vp] = sum(values) / len(values) if values else None
    return table, means


def pooled_reference(anns, full_preds, alpha):
    hits = []
    for ann, pred in zip(anns, full_preds):
        left, up, right, down = ann['trg_bndbox']
        side = max(right - left, down - up)
        hits += [math.hypot(g[0] - t[0], g[1] - t[1]) / side < alpha
                 for s, t, g in zip(ann['src_kps'], ann['trg_kps'], pred)
                 if _valid(s) and _valid(t)]
    return 100. * sum(hits) / len(hits)


def _pair(rng, category, vp, num, missing=0.2):
    """Raw SPair pair annotation: integer keypoints of a 64 x 48 (W x H)
    source and an 80 x 60 target, some outside the image, some missing."""
    def points(width, height):
        pts = np.stack([rng.integers(-8, width + 9, num),
                        rng.integers(-8, height + 9, num)], 1).tolist()
        for i in np.flatnonzero(rng.random(num) < missing):
            pts[i] = None if rng.random() < 0.5 else [-1, -1]
        return pts
    x1, y1 = rng.integers(0, 20, 2).tolist()
    return dict(category=category, viewpoint_variation=vp,
                src_imname='a.jpg', trg_imname='b.jpg',
                src_imsize=[64, 48, 3], trg_imsize=[80, 60, 3],
                src_kps=points(64, 48), trg_kps=points(80, 60),
                src_bndbox=[0, 0, 40, 30],
                trg_bndbox=[x1, y1, x1 + int(rng.integers(10, 60)),
                            y1 + int(rng.integers(10, 40))])


def _predictions(rng, ann):
    """Full-length guesses: near the target keypoint at ~0.1 of the box,
    every fourth one exactly 0.1 x the box side away (a tie, a miss)."""
    left, up, right, down = ann['trg_bndbox']
    side = max(right - left, down - up)
    out = []
    for i, trg in enumerate(ann['trg_kps']):
        base = np.array(trg if _valid(trg) else [0, 0], float)
        if i % 4 == 3:
            out.append((base + [0.1 * side, 0]).tolist())
        else:
            out.append((base + rng.normal(0, 0.08 * side, 2)).tolist())
    return out


@pytest.fixture
def fixture_set(tmp_path):
    rng = np.random.default_rng(0)
    anns = [_pair(rng, 'cat', vp, int(rng.integers(3, 9)))
            for vp in (0, 0, 1, 2, 2)]
    anns += [_pair(rng, 'dog', vp, int(rng.integers(3, 9)))
             for vp in (0, 2, 2)]
    anns.append(_pair(rng, 'bird', 1, 1, missing=0))  # one keypoint
    bus = _pair(rng, 'bus', 0, 3, missing=0)
    bus['src_kps'][:2] = [None, [-1, -1]]
    bus['trg_kps'][2] = None  # a pair, no keypoint in both images
    anns.append(bus)
    folder = tmp_path / 'PairAnnotation' / 'test'
    folder.mkdir(parents=True)
    for i, ann in enumerate(anns):
        (folder / f'{i:03d}-a-b:{ann["category"]}.json').write_text(
            json.dumps(ann))
    return tmp_path, anns, [_predictions(rng, a) for a in anns]


def _ours(pairs, anns, full_preds):
    """Predictions of the keypoints read_spair_pairs keeps."""
    preds = []
    for ann, full in zip(anns, full_preds):
        keep = [_valid(s) and _valid(t)
                for s, t in zip(ann['src_kps'], ann['trg_kps'])]
        preds.append(torch.tensor(full, dtype=torch.float64)[keep].reshape(
            -1, 2))
    hws = [(a['trg_imsize'][1], a['trg_imsize'][0]) for a in anns]
    return preds, hws


@pytest.mark.parametrize('by', ['bbox', 'image'])
def test_pck_equals_probe3d_formula(fixture_set, by):
    root, anns, full_preds = fixture_set
    pairs = read_spair_pairs(str(root), categories=[
        'cat', 'dog', 'bird', 'bus', 'sofa'])
    assert [p['category'] for p in pairs] == [a['category'] for a in anns]
    preds, hws = _ours(pairs, anns, full_preds)
    metrics = spair_pck(pairs, preds, hws, by)
    expected_keys = set()
    for alpha in ALPHAS:
        table, means = probe3d_reference(anns, full_preds, alpha, by)
        assert math.isnan(table['bus', None])  # Probe3D's NaN: left out
        assert metrics[f'pck@{alpha:g}'] == pytest.approx(means[None])
        expected_keys.add(f'pck@{alpha:g}')
        for vp in (0, 1, 2):
            assert metrics[f'pck@{alpha:g}/vp{vp}'] == pytest.approx(
                means[vp])
            expected_keys.add(f'pck@{alpha:g}/vp{vp}')
        for cat in ('cat', 'dog', 'bird'):
            assert metrics[f'pck@{alpha:g}/category/{cat}'] == \
                pytest.approx(table[cat, None])
            expected_keys.add(f'pck@{alpha:g}/category/{cat}')
        if by == 'bbox':
            assert metrics[f'pck@{alpha:g}/keypoints'] == pytest.approx(
                pooled_reference(anns, full_preds, alpha))
        expected_keys.add(f'pck@{alpha:g}/keypoints')
    assert set(metrics) == expected_keys  # no bus, no sofa
    assert metrics['pck@0.1/category/bird'] in (0., 100.)


def test_reader_drops_missing_keeps_outside(fixture_set):
    root, anns, _ = fixture_set
    pairs = read_spair_pairs(str(root))
    for pair, ann in zip(pairs, anns):
        both = [(s, t) for s, t in zip(ann['src_kps'], ann['trg_kps'])
                if _valid(s) and _valid(t)]
        assert pair['missing'] == len(ann['src_kps']) - len(both)
        assert pair['src_kps'].tolist() == [list(map(float, s))
                                            for s, _ in both]
        assert pair['trg_kps'].tolist() == [list(map(float, t))
                                            for _, t in both]
        assert pair['viewpoint_variation'] == ann['viewpoint_variation']
    kept = torch.cat([p['trg_kps'] for p in pairs])
    assert ((kept < 0) | (kept[:, :1] > 80) | (kept[:, 1:] > 60)).any()
    assert len(pairs[-1]['src_kps']) == 0  # bus: a pair, no keypoint


def test_exact_tie_is_a_miss():
    """Probe3D's strict ``<``: a keypoint exactly 0.1 x the box side away
    misses PCK@0.1 and hits nothing below."""
    pair = dict(category='c', trg_kps=torch.tensor([[10., 10.]]),
                trg_bbox=[0, 0, 40, 20], viewpoint_variation=0)
    hit = spair_pck([pair], [torch.tensor([[10., 14.]])], [(64, 64)],
                    alphas=(0.1, 0.10001))
    assert hit['pck@0.1'] == 0. and hit['pck@0.10001'] == 100.


def test_identity_baseline_is_the_scaled_source(fixture_set):
    root, anns, _ = fixture_set
    pairs = read_spair_pairs(str(root))
    hws = [((a['src_imsize'][1], a['src_imsize'][0]),
            (a['trg_imsize'][1], a['trg_imsize'][0])) for a in anns]
    metrics, preds = identity_baseline(pairs, hws)
    full = [[[s[0] * 80 / 64, s[1] * 60 / 48] if _valid(s) else [0, 0]
             for s in a['src_kps']] for a in anns]
    for pair, pred, ann, guess in zip(pairs, preds, anns, full):
        keep = [_valid(s) and _valid(t)
                for s, t in zip(ann['src_kps'], ann['trg_kps'])]
        assert torch.allclose(pred, torch.tensor(
            [g for g, k in zip(guess, keep) if k],
            dtype=torch.float64).reshape(-1, 2))
    for alpha in ALPHAS:
        table, means = probe3d_reference(anns, full, alpha)
        assert metrics[f'pck@{alpha:g}'] == pytest.approx(means[None])
        for vp in (0, 1, 2):
            assert metrics[f'pck@{alpha:g}/vp{vp}'] == pytest.approx(
                means[vp])


def test_no_keypoint_or_mismatch_is_an_error():
    empty = dict(category='c', trg_kps=torch.zeros(0, 2),
                 trg_bbox=[0, 0, 4, 4])
    with pytest.raises(BadInputError, match='no keypoint'):
        spair_pck([empty], [torch.zeros(0, 2)], [(8, 8)])
    one = dict(empty, trg_kps=torch.ones(1, 2))
    with pytest.raises(BadInputError, match='predictions of'):
        spair_pck([one], [torch.ones(2, 2)], [(8, 8)])
    with pytest.raises(BadInputError, match='viewpoint_variation 3'):
        spair_pck([dict(one, viewpoint_variation=3)], [torch.ones(1, 2)],
                  [(8, 8)])
    with pytest.raises(BadInputError, match='empty box'):
        spair_pck([dict(one, trg_bbox=[3, 3, 3, 3])], [torch.ones(1, 2)],
                  [(8, 8)])
