"""Keypoint correspondence (SPair-71k / Probe3D protocol): PCK by hand,
identity pairs, equality with a brute-force matcher, the SPair reader, the
mini pairs' exact ground truth, and the tool end to end."""
import json
import math

import numpy as np
import pytest
import torch

from conftest import REPO
from mmpos.evaluation.correspondence import (correspondence_pck,
                                             match_keypoints, patch_centres,
                                             pck, pck_hits, pck_threshold,
                                             read_spair_pairs)
from mmpos.errors import BadInputError
from conftest import load_tool


def test_pck_by_hand():
    gt = torch.tensor([[10., 10.], [20., 20.], [30., 30.]])
    pred = gt + torch.tensor([[0., 0.], [3., 0.], [0., 6.]])
    box = [5, 5, 45, 25]  # 40 x 20: threshold 40
    assert pck_threshold(box, (100, 60)) == 40
    assert pck_threshold(box, (100, 60), by='image') == 100
    hits = pck_hits(pred, gt, 40)  # alpha 0.05: 2 px, 0.1: 4 px
    assert hits[0.05].tolist() == [True, False, False]
    assert hits[0.1].tolist() == [True, True, False]
    two = pck([hits, pck_hits(gt, gt, 40)])  # 3 + 3 keypoints
    assert two['pck@0.05'] == pytest.approx(400 / 6)
    assert two['pck@0.1'] == pytest.approx(500 / 6)


def test_identity_pairs_give_pck_100():
    g = torch.Generator().manual_seed(0)
    feats = torch.randn(16, 6, 8, generator=g)
    kps = patch_centres((6, 8), (48, 64))[torch.randperm(48, generator=g)[
        :10]]
    pair = dict(category='c', src_kps=kps, trg_kps=kps,
                trg_bbox=[0, 0, 64, 48])
    metrics, preds = correspondence_pck([pair], [feats], [feats],
                                        [((48, 64), (48, 64))], upsample=1)
    assert set(metrics.values()) == {100.}
    assert torch.equal(preds[0], kps)


def brute_force_match(src, trg, kps, src_hw, trg_hw):
    """Bilinear sampling (patch centres at (j + 0.5) W / w, borders
    clamped) and cosine nearest neighbour, one keypoint and patch at a
    time."""
    c, h, w = src.shape
    out = []
    for x, y in kps.tolist():
        fx = min(max(x / src_hw[1] * w - 0.5, 0), w - 1)
        fy = min(max(y / src_hw[0] * h - 0.5, 0), h - 1)
        x0, y0 = int(math.floor(fx)), int(math.floor(fy))
        x1, y1 = min(x0 + 1, w - 1), min(y0 + 1, h - 1)
        ax, ay = fx - x0, fy - y0
        q = ((1 - ax) * (1 - ay) * src[:, y0, x0] + ax * (1 - ay) *
             src[:, y0, x1] + (1 - ax) * ay * src[:, y1, x0] +
             ax * ay * src[:, y1, x1])
        best, arg = -2., None
        th, tw = trg.shape[1:]
        for i in range(th):
            for j in range(tw):
                sim = torch.nn.functional.cosine_similarity(
                    q, trg[:, i, j], dim=0).item()
                if sim > best:
                    best, arg = sim, (i, j)
        out.append([(arg[1] + 0.5) * trg_hw[1] / tw,
                    (arg[0] + 0.5) * trg_hw[0] / th])
    return torch.tensor(out)


def test_matching_equals_brute_force():
    g = torch.Generator().manual_seed(1)
    src = torch.randn(8, 5, 7, generator=g)
    trg = torch.randn(8, 6, 4, generator=g)
    kps = torch.rand(12, 2, generator=g) * torch.tensor([70., 50.])
    kps[0] = torch.tensor([0.2, 49.9])  # near the borders
    pred = match_keypoints(src, trg, kps, (50, 70), (30, 20), upsample=1)
    assert torch.allclose(pred, brute_force_match(src, trg, kps, (50, 70),
                                                  (30, 20)))


def test_mini_spair_ground_truth_is_exact(dense_mini):
    """A small blob drawn at a source keypoint lands, after the
    generator's warp, where the homography maps the keypoint; the pair
    files hold exactly those mapped keypoints."""
    from mmpos_harness.mini_data.pairs import (_apply_homography,
                                           _random_homography, _warp)
    rng = np.random.default_rng(0)
    size = 64
    for _ in range(5):
        matrix, _ = _random_homography(rng, size)
        point = rng.uniform(24, 40, 2)
        ys, xs = np.mgrid[0:size, 0:size] + 0.5
        blob = np.exp(-((xs - point[0])**2 + (ys - point[1])**2) / 2.)
        warped = _warp(blob.astype(np.float32), matrix)
        expected = _apply_homography(matrix, point[None])[0]
        # the reflected border may show a mirrored copy farther away
        warped *= np.hypot(xs - expected[0], ys - expected[1]) < 8
        centroid = np.array([(warped * xs).sum(), (warped * ys).sum()
                             ]) / warped.sum()
        assert np.abs(centroid - expected).max() < 0.1
    pairs = read_spair_pairs(str(dense_mini / 'spair'), 'test')
    assert len(pairs) == 3
    geometric = [p for p in pairs if p['category'] == 'homography']
    assert geometric  # pair 0 of each split
    for pair in geometric:
        ann = json.load(open(dense_mini / 'spair' / 'PairAnnotation' /
                             'test' / f'{pair["name"]}.json'))
        mapped = _apply_homography(np.array(ann['mini_homography']),
                                   pair['src_kps'].double().numpy())
        assert np.abs(mapped - pair['trg_kps'].numpy()).max() < 2e-3
        assert ((pair['trg_kps'] >= 0) & (pair['trg_kps'] <= 32)).all()


def test_spair_reader_names_bad_files(tmp_path):
    folder = tmp_path / 'PairAnnotation' / 'test'
    folder.mkdir(parents=True)
    (folder / '1-a-b:cat.json').write_text(json.dumps(dict(
        category='cat', src_imname='a.jpg', trg_imname='b.jpg',
        src_kps=[[1, 2]], trg_kps=[[1, 2]], src_bndbox=[0, 0, 4, 4])))
    with pytest.raises(BadInputError, match="1-a-b:cat.json: no key "
                       "'trg_bndbox'"):
        read_spair_pairs(str(tmp_path))


def test_correspondence_tool_end_to_end(dense_mini, tmp_path):
    load_tool('keypoint_correspondence').main([
        str(REPO / 'configs/demo/droppos_vit-tiny-rope-mixed_mini.py'),
        'none', '--probe',
        str(REPO / 'configs/dense_probes/correspondence_mini-spair.py'),
        '--data-root', str(dense_mini / 'spair'), '--size', '32',
        '--work-dir', str(tmp_path), '--pictures', '2'])
    metrics = json.load(open(tmp_path / 'metrics.json'))
    assert {'correspondence/pck@0.05', 'correspondence/pck@0.1',
            'correspondence/pck@0.1/keypoints'} <= set(metrics)
    assert {k.split('/')[-1] for k in metrics if '/category/' in k} == {
        p['category'] for p in read_spair_pairs(str(dense_mini / 'spair'))}
    assert 0 <= metrics['correspondence/pck@0.05'] <= metrics[
        'correspondence/pck@0.1'] <= 100
    assert (tmp_path / 'matches.png').is_file()
