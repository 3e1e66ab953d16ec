"""Localisation below the patch: the upsampled matcher equals a brute-force
search over the cell centres, and with an oracle feature (the true
source-frame position of every pixel) on pairs related by known
homographies it reaches >= 99% PCK@0.05, where the patch-centre matcher
(``upsample=1``) is capped by the distance to the nearest patch centre."""
import math

import numpy as np
import pytest
import torch

from mmpos.evaluation.correspondence import (correspondence_pck,
                                             match_keypoints, spair_pck)
from mmpos_harness.mini_data.pairs import (MARGIN, _apply_homography,
                                           _random_homography)


def bilinear(feats, x, y, hw):
    """``feats`` ``(C, h, w)`` at pixel ``(x, y)`` of an ``hw`` image:
    patch centres at ``(j + 0.5) W / w``, borders clamped."""
    _, h, w = feats.shape
    fx = min(max(x / hw[1] * w - 0.5, 0), w - 1)
    fy = min(max(y / hw[0] * h - 0.5, 0), h - 1)
    x0, y0 = int(math.floor(fx)), int(math.floor(fy))
    x1, y1 = min(x0 + 1, w - 1), min(y0 + 1, h - 1)
    ax, ay = fx - x0, fy - y0
    return ((1 - ax) * (1 - ay) * feats[:, y0, x0] +
            ax * (1 - ay) * feats[:, y0, x1] +
            (1 - ax) * ay * feats[:, y1, x0] + ax * ay * feats[:, y1, x1])


def test_upsampled_matching_equals_brute_force():
    g = torch.Generator().manual_seed(3)
    src = torch.randn(6, 4, 5, generator=g, dtype=torch.float64)
    trg = torch.randn(6, 3, 4, generator=g, dtype=torch.float64)
    kps = torch.rand(30, 2, generator=g, dtype=torch.float64) * 40
    src_hw, trg_hw, up = (40, 40), (30, 36), 3
    pred = match_keypoints(src, trg, kps, src_hw, trg_hw, upsample=up)
    rows, cols, in_ring = 3 * up, 4 * up, 0
    for (x, y), guess in zip(kps.tolist(), pred.tolist()):
        query = bilinear(src, x, y, src_hw)
        best = max(((torch.nn.functional.cosine_similarity(
            query, bilinear(trg, (j + .5) * 36 / cols, (i + .5) * 30 / rows,
                            trg_hw), dim=0).item(), -i, -j)
                    for i in range(rows) for j in range(cols)))
        i, j = -best[1], -best[2]
        cell = [(j + .5) * 36 / cols, (i + .5) * 30 / rows]
        # a cell in the outer half patch predicts the outer patch centre
        assert guess == pytest.approx([min(max(cell[0], 4.5), 31.5),
                                       min(max(cell[1], 5), 25)])
        in_ring += not (4.5 <= cell[0] <= 31.5 and 5 <= cell[1] <= 25)
    assert in_ring  # the clamp is exercised


def oracle_pairs(num=24, size=64, patch=8, seed=0):
    """Pairs of ``size`` px images related by mini-SPair's random
    homographies, 10 keypoints each (half a patch from the border), and
    oracle patch features: the mean over each patch's pixels of a random
    linear map of (u, v, 1), (u, v) the pixel's source-frame position,
    so that cosine similarity peaks exactly where positions agree."""
    rng = np.random.default_rng(seed)
    lift = rng.normal(size=(16, 3))
    centres = np.arange(size) + 0.5
    pixels = np.stack(np.meshgrid(centres, centres), -1).reshape(-1, 2)
    grid = size // patch

    def feats(positions):
        field = (np.concatenate([positions / size - 0.5,
                                 np.ones((len(positions), 1))], 1) @ lift.T)
        field = field.reshape(grid, patch, grid, patch, -1).mean((1, 3))
        return torch.tensor(field.transpose(2, 0, 1))

    pairs, src_feats, trg_feats = [], [], []
    lo, hi = MARGIN * size, (1 - MARGIN) * size
    while len(pairs) < num:
        matrix, _ = _random_homography(rng, size)
        kps = rng.uniform(lo, hi, (60, 2))
        mapped = _apply_homography(matrix, kps)
        keep = np.all((mapped > lo) & (mapped < hi), 1)
        if keep.sum() < 10:
            continue
        kps, mapped = kps[keep][:10], mapped[keep][:10]
        box = [*mapped.min(0), *mapped.max(0)]
        if max(box[2] - box[0], box[3] - box[1]) < 0.45 * size:
            continue  # mini-SPair's smallest boxes
        pairs.append(dict(category='oracle', viewpoint_variation=0,
                          src_kps=torch.tensor(kps, dtype=torch.float32),
                          trg_kps=torch.tensor(mapped, dtype=torch.float32),
                          trg_bbox=box))
        src_feats.append(feats(pixels))
        trg_feats.append(feats(_apply_homography(np.linalg.inv(matrix),
                                                 pixels)))
    return pairs, src_feats, trg_feats, [((size, size), (size, size))] * num


def test_oracle_feature_reaches_pck_100_below_the_patch():
    pairs, src, trg, hws = oracle_pairs()
    fine, _ = correspondence_pck(pairs, src, trg, hws, upsample=8)
    assert fine['pck@0.05'] >= 99.
    snapped, preds = correspondence_pck(pairs, src, trg, hws, upsample=1)
    # The patch-centre matcher predicts patch centres only: a keypoint
    # farther than 0.05 x its box side from every centre is always missed.
    centres = (torch.arange(8) + 0.5) * 8
    reachable = []
    for pair in pairs:
        nearest = (pair['trg_kps'][:, None] - torch.stack(torch.meshgrid(
            centres, centres, indexing='xy'), -1).reshape(1, -1, 2)).norm(
                dim=-1).min(1).values
        box = pair['trg_bbox']
        reachable.append(nearest < 0.05 * max(box[2] - box[0],
                                              box[3] - box[1]))
    cap = 100. * torch.cat(reachable).float().mean().item()
    assert snapped['pck@0.05'] <= cap < 50.
    assert all(((p - 4) % 8 == 0).all() for p in preds)
    # and the oracle's nearest-centre choice is what it gets
    assert spair_pck(pairs, preds, [hw[1] for hw in hws])['pck@0.05'] == \
        snapped['pck@0.05']
