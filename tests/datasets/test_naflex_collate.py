"""NaFlex collate and data preprocessor: padding to the longest sequence,
the valid mask, and pixels normalised as whole images are; samples of
several views (DINOv2's crops) collate and normalise view by view."""
import numpy as np
import torch
from mmengine.registry import FUNCTIONS

from mmpos.datasets.naflex import (NaFlexDataPreprocessor, cat_naflex,
                                   pad_naflex, padding_fraction)
from mmpos.datasets.transforms import NaFlexPatchify, PackNaFlexInputs


def packed(h, w, seed):
    img = np.random.default_rng(seed).integers(0, 255, (h, w, 3), np.uint8)
    return img, PackNaFlexInputs()(NaFlexPatchify(8)(dict(img=img)))


def test_collate_pads_to_the_longest_sequence():
    data = [packed(16, 32, 0)[1], packed(24, 8, 1)[1], packed(8, 8, 2)[1]]
    collate = FUNCTIONS.get('naflex_collate')
    batch = collate(data)
    inputs = batch['inputs']
    assert inputs['patches'].shape == (3, 8, 192)
    assert inputs['patch_valid'].sum(1).tolist() == [8, 3, 1]
    assert inputs['patches'][2, 1:].eq(0).all()
    assert inputs['patch_coord'][1, :3].tolist() == [[0, 0], [1, 0], [2, 0]]
    assert padding_fraction(inputs['patch_valid']) == 1 - 12 / 24
    assert len(batch['data_samples']) == 3
    assert pad_naflex([d['inputs'] for d in data], pad_to=10)[
        'patches'].shape[1] == 10


def test_preprocessor_normalises_like_whole_images():
    mean, std = (120., 110., 100.), (60., 50., 40.)
    img, sample = packed(16, 24, 0)
    pre = NaFlexDataPreprocessor(mean=mean, std=std, to_rgb=True)
    out = pre(dict(inputs=pad_naflex([sample['inputs']]),
                   data_samples=[sample['data_samples']]))['inputs']
    rgb = (img[..., ::-1] - np.array(mean)) / np.array(std)
    expected = rgb.reshape(2, 8, 3, 8, 3).transpose(0, 2, 1, 3, 4)
    np.testing.assert_allclose(out['patches'][0].numpy(),
                               expected.reshape(6, 192), rtol=1e-6)


def test_preprocessor_passes_whole_images_normalised():
    mean, std = (120., 110., 100.), (60., 50., 40.)
    img, _ = packed(16, 24, 0)
    pre = NaFlexDataPreprocessor(mean=mean, std=std, to_rgb=True)
    out = pre(dict(inputs=[torch.from_numpy(img.copy()).permute(2, 0, 1)],
                   data_samples=None))['inputs']
    expected = (img[..., ::-1] - np.array(mean)) / np.array(std)
    np.testing.assert_allclose(out[0].permute(1, 2, 0).numpy(), expected,
                               rtol=1e-6)


def test_preprocessor_refuses_batch_augments():
    import pytest
    with pytest.raises(ValueError, match='batch augments'):
        NaFlexDataPreprocessor(batch_augments=dict(augments=[]))


def test_views_collate_and_normalise_view_by_view():
    rng = np.random.default_rng(0)
    views = [rng.integers(0, 255, (h, w, 3), np.uint8)
             for h, w in ((16, 32), (8, 8))]
    other = [rng.integers(0, 255, (h, w, 3), np.uint8)
             for h, w in ((24, 8), (8, 16))]
    data = [PackNaFlexInputs()(NaFlexPatchify(8)(dict(img=v)))
            for v in (views, other)]
    assert data[0]['data_samples'].patch_hw == [(2, 4), (1, 1)]
    batch = FUNCTIONS.get('naflex_collate')(data)
    assert [v['patch_valid'].sum(1).tolist() for v in batch['inputs']] == [
        [8, 3], [1, 2]]
    pre = NaFlexDataPreprocessor(mean=(10., 20., 30.), std=(2., 4., 8.))
    out = pre(batch)['inputs']
    for view, normed in zip(batch['inputs'], out):
        torch.testing.assert_close(normed['patches'],
                                   pre(dict(inputs=view))['inputs']['patches'])
    both = cat_naflex(out)  # one batch of all views' images, padded
    assert both['patches'].shape[:2] == (4, 8)
    assert both['patch_valid'].sum(1).tolist() == [8, 3, 1, 2]
    torch.testing.assert_close(both['patches'][2, 0],
                               out[1]['patches'][0, 0])
