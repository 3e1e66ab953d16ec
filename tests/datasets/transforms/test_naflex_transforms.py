"""NaFlex transforms: timm's token-budget size rule, the resize at the
image's aspect ratio and the patch sequence with its grid coordinates."""
import random

import numpy as np
import pytest

from mmpos.datasets.transforms import (NaFlexPatchify, NaFlexResize,
                                       PackNaFlexInputs, naflex_size,
                                       patchify)


def test_naflex_size_is_timms_rule():
    """Equal to timm 1.0.31's get_image_size_for_seq (bisection) on random
    sizes, patches and budgets."""
    naflex = pytest.importorskip('timm.data.naflex_transforms')
    rng = random.Random(0)
    for _ in range(200):
        hw = (rng.randint(8, 900), rng.randint(8, 900))
        patch = rng.choice([8, 14, 16])
        budget = rng.choice([16, 64, 100, 256, 576])
        expected = naflex.get_image_size_for_seq(hw, patch, budget)[1]
        assert naflex_size(hw, patch, budget) == tuple(expected), \
            (hw, patch, budget)


@pytest.mark.parametrize('hw', [(480, 640), (640, 160), (50, 50), (37, 1000)])
def test_naflex_size_fills_the_budget_at_the_aspect_ratio(hw):
    """At most the budget; one patch more per side would exceed it; the
    aspect ratio within one patch per side."""
    H, W = naflex_size(hw, 16, 256)
    h, w = H // 16, W // 16
    assert H % 16 == 0 and W % 16 == 0 and h * w <= 256
    assert (h + 1) * (w + 1) > 256
    assert abs(W / H - hw[1] / hw[0]) <= (W / H) * (1 / h + 1 / w) + 1e-9


def test_naflex_size_max_ratio_stops_upsampling():
    assert naflex_size((32, 48), 16, 256, max_ratio=1.) == (32, 48)
    with pytest.raises(ValueError, match='positive'):
        naflex_size((0, 10), 16, 256)


def test_patchify_is_row_major_with_yx_coordinates():
    img = np.arange(4 * 6 * 3).reshape(4, 6, 3)
    patches, coord = patchify(img, 2)
    assert patches.shape == (6, 12) and coord.tolist() == [
        [0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]
    for (y, x), patch in zip(coord, patches):  # (row, column, channel)
        np.testing.assert_array_equal(
            patch.reshape(2, 2, 3), img[2 * y:2 * y + 2, 2 * x:2 * x + 2])
    with pytest.raises(ValueError, match='multiples'):
        patchify(img[:3], 2)


def test_pipeline_resizes_patchifies_and_packs():
    img = np.random.default_rng(0).integers(0, 255, (120, 300, 3), np.uint8)
    results = NaFlexResize(16, max_tokens=64)(dict(img=img))
    assert results['img'].shape[:2] == results['img_shape'] == (80, 192)
    results = NaFlexPatchify(16)(results)
    assert results['patch_hw'] == (5, 12) and 'img' not in results
    packed = PackNaFlexInputs()(results)
    inputs = packed['inputs']
    assert inputs['patches'].shape == (60, 16 * 16 * 3)
    assert inputs['patch_coord'].max(0).values.tolist() == [4, 11]
    assert packed['data_samples'].patch_hw == (5, 12)
