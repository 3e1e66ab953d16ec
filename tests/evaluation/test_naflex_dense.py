"""The correspondence probe on NaFlex batches: every image's map of a
padded batch of mixed aspect ratios is the map its own resize gives alone
(the split back to per-image grids places every patch), and identity pairs
matched through the whole path (files, NaFlex resize, features, maps over
the original pixels) give PCK 100."""
import numpy as np
import pytest
import torch
from PIL import Image

from mmpos.apis.features import extract_features, read_images
from mmpos.errors import UnsupportedModelError
from mmpos.evaluation.correspondence import (correspondence_pck,
                                             patch_centres)
from mmpos.evaluation.naflex import (naflex_features, naflex_inputs,
                                     naflex_pair_features)
from mmpos.models.backbones import RoPEVisionTransformer

ARCH = dict(embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64)
SHAPES = [(40, 120), (96, 32), (64, 64), (50, 70)]  # (H, W) pixels
MEAN, STD = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]
BUDGET = 24  # patches of 8 px


def backbone(**kwargs):
    torch.manual_seed(0)
    model = RoPEVisionTransformer(arch=ARCH, patch_size=8, img_size=32,
                                  rope=dict(type='mixed'), use_ape=True,
                                  num_register_tokens=1, **kwargs)
    model.init_weights()
    return model.eval()


@pytest.fixture
def image_files(tmp_path):
    g = np.random.default_rng(0)
    paths = []
    for i, (h, w) in enumerate(SHAPES):
        paths.append(str(tmp_path / f'{i}.png'))
        Image.fromarray(g.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(
            paths[-1])
    return paths


def test_each_images_map_in_a_mixed_batch_is_its_map_alone(image_files):
    model = backbone(out_type='raw', out_indices=(0, 1))
    feats = naflex_features(model, image_files, BUDGET, MEAN, STD,
                            batch_size=4)
    grids = [tuple(m.shape[1:]) for m in feats['patch'][-1]]
    assert len(set(grids)) == 4 and all(h * w <= BUDGET for h, w in grids)
    assert grids[0][1] > grids[0][0] and grids[1][0] > grids[1][1]
    for b, path in enumerate(image_files):
        one = naflex_inputs(read_images([path]), 8, BUDGET, MEAN, STD)
        h, w = grids[b]
        image = one['patches'][0].reshape(h, w, 8, 8, 3).permute(
            4, 0, 2, 1, 3).reshape(1, 3, 8 * h, 8 * w)
        alone = extract_features(model, image)['layers']
        for i, layer in enumerate(alone):
            torch.testing.assert_close(feats['patch'][i][b],
                                       layer['patch_tokens'][0],
                                       rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(feats['cls'][i][b],
                                       layer['cls_token'][0],
                                       rtol=1e-5, atol=1e-5)


def test_identity_pairs_through_naflex_give_pck_100(image_files):
    model = backbone(out_type='raw')
    pairs = []
    for path, hw in zip(image_files, SHAPES):
        pairs.append(dict(category='c', src_img=path, trg_img=path,
                          trg_bbox=[0, 0, hw[1], hw[0]]))
    src, trg, hws = naflex_pair_features(model, pairs, BUDGET, MEAN, STD,
                                         batch_size=3)
    assert hws == [(hw, hw) for hw in SHAPES]
    for pair, src_map, hw in zip(pairs, src, SHAPES):
        # keypoints at the centres of the image's own NaFlex grid
        pair['src_kps'] = pair['trg_kps'] = patch_centres(
            src_map.shape[1:], hw)
    metrics, _ = correspondence_pck(pairs, src, trg, hws, alphas=(0.01, ),
                                    upsample=1)
    assert metrics['pck@0.01'] == 100.


def test_featmap_and_other_backbones_are_refused(image_files):
    with pytest.raises(UnsupportedModelError, match="out_type='raw'"):
        naflex_features(backbone(out_type='featmap'), image_files, BUDGET,
                        MEAN, STD)


def test_correspondence_tool_on_naflex_maps(dense_mini, tmp_path):
    """``--max-tokens``: the probe's tool matches NaFlex maps."""
    import json

    from conftest import REPO, load_tool
    load_tool('keypoint_correspondence').main([
        str(REPO / 'configs/demo/droppos_vit-tiny-rope-mixed_mini.py'),
        'none', '--probe',
        str(REPO / 'configs/dense_probes/correspondence_mini-spair.py'),
        '--data-root', str(dense_mini / 'spair'), '--max-tokens', '12',
        '--work-dir', str(tmp_path), '--pictures', '0'])
    metrics = json.load(open(tmp_path / 'metrics.json'))
    assert 0 <= metrics['correspondence/pck@0.05'] <= metrics[
        'correspondence/pck@0.1'] <= 100
    assert 'max_tokens' in (tmp_path / 'result.md').read_text()


def test_probe_tool_refuses_max_tokens_for_a_square_probe(monkeypatch,
                                                         tmp_path):
    import argparse
    import dataclasses

    from conftest import REPO
    from mmpos.errors import BadInputError
    from mmpos.evaluation import dense_suite
    monkeypatch.setitem(dense_suite.PROBES, 'correspondence',
                        dataclasses.replace(
                            dense_suite.PROBES['correspondence'],
                            naflex=False))
    args = argparse.Namespace(
        probe=str(REPO / 'configs/dense_probes/correspondence_mini-spair.py'),
        work_dir=str(tmp_path), max_tokens=12)
    with pytest.raises(BadInputError, match='--max-tokens: the '
                       'correspondence probe does not run on NaFlex maps'):
        dense_suite.probe_tool(args, 'correspondence', 'title')
