"""Crop-box multi-view transforms: the recorded boxes locate every view
pixel in the source image, through crops, resizes and flips in any order."""
import numpy as np
import pytest
import torch
from mmengine.registry import init_default_scope

from mmpos.datasets.transforms.crop_boxes import (MultiViewWithBoxes,
                                                  RandomFlipWithBox,
                                                  RandomResizedCropWithBox,
                                                  box_to_tlhw, tlhw_to_box)
from mmpos.registry import TRANSFORMS

H, W = 90, 120


@pytest.fixture(autouse=True)
def scope():
    init_default_scope('mmpretrain')  # restored by conftest


def ramp_image():
    """float32 image: channel 0 = source column, channel 1 = source row
    (pixel centres at integer values)."""
    ys, xs = np.mgrid[0:H, 0:W].astype(np.float32)
    return np.stack([xs, ys, np.zeros_like(xs)], axis=-1)


def predicted(box, out_hw):
    """Source (column, row) of each view pixel centre from the box."""
    oh, ow = out_hw
    u = (np.arange(ow) + .5) / ow
    v = (np.arange(oh) + .5) / oh
    x1, y1, x2, y2 = box
    cols = (x1 + u * (x2 - x1)) * W - .5
    rows = (y1 + v * (y2 - y1)) * H - .5
    return np.broadcast_to(cols, out_hw), np.broadcast_to(rows[:, None],
                                                          out_hw)


CROP = dict(type='RandomResizedCropWithBox', scale=(24, 32),
            crop_ratio_range=(0.1, 1.))


@pytest.mark.parametrize('pipeline', [
    [CROP],
    [CROP, dict(type='RandomFlipWithBox', prob=1.)],
    [CROP, dict(type='RandomFlipWithBox', prob=1., direction='vertical')],
    [dict(type='RandomFlipWithBox', prob=1.), CROP],
    [dict(type='RandomFlipWithBox', prob=1., direction='diagonal'), CROP,
     dict(type='RandomResizedCropWithBox', scale=16,
          crop_ratio_range=(0.3, 1.)),
     dict(type='RandomFlipWithBox', prob=1.)],
])
def test_box_locates_every_view_pixel(pipeline):
    """Bilinear resizing is exact on the linear ramp, so inside the view
    each pixel holds exactly the source position the box predicts."""
    np.random.seed(1)
    view = MultiViewWithBoxes([pipeline], num_views=3)(dict(img=ramp_image()))
    for img, box in zip(view['img'], view['crop_boxes']):
        cols, rows = predicted(box, img.shape[:2])
        inner = (slice(1, -1), slice(1, -1))  # border pixels are clamped
        np.testing.assert_allclose(img[..., 0][inner], cols[inner], atol=2e-3)
        np.testing.assert_allclose(img[..., 1][inner], rows[inner], atol=2e-3)


def test_flip_swaps_box_edges_and_sets_flip_keys():
    results = dict(img=ramp_image(), crop_box=np.float32([.1, .2, .6, .9]))
    out = RandomFlipWithBox(prob=1., direction='horizontal')(results)
    assert out['flip'] and out['flip_direction'] == 'horizontal'
    np.testing.assert_array_equal(out['crop_box'],
                                  np.float32([.6, .2, .1, .9]))
    kept = RandomFlipWithBox(prob=0.)(dict(img=ramp_image()))
    assert 'crop_box' not in kept and not kept['flip']


def test_tlhw_round_trip_in_paper_notation():
    """(top, left, height, width) in source pixels plus flips <-> boxes."""
    tlhw = np.float32([[10, 20, 30, 40], [0, 0, 90, 120]])
    box = tlhw_to_box(tlhw, (H, W), hflip=[True, False], vflip=[False, True])
    np.testing.assert_allclose(box[0], [60 / W, 10 / H, 20 / W, 40 / H])
    np.testing.assert_allclose(box[1], [0, 1, 1, 0])
    back, hflip, vflip = box_to_tlhw(box, (H, W))
    np.testing.assert_allclose(back, tlhw, atol=1e-4)
    assert hflip.tolist() == [True, False] and vflip.tolist() == [False, True]


def test_crop_records_the_sampled_pixel_box():
    np.random.seed(3)
    out = RandomResizedCropWithBox(scale=8)(dict(img=ramp_image()))
    tlhw, hflip, _ = box_to_tlhw(out['crop_box'], (H, W))
    top, left, height, width = np.round(tlhw).astype(int)
    assert not hflip and out['img'].shape[:2] == (8, 8)
    np.random.seed(3)  # the same draw, checked against the parent's sampler
    assert RandomResizedCropWithBox(scale=8).rand_crop_params(
        ramp_image()) == (top, left, height, width)


def relation(a, b):
    """'containing', 'overlapping' or 'disjoint' for (top, left, h, w)."""
    (at, al, ah, aw), (bt, bl, bh, bw) = a, b
    ih = min(at + ah, bt + bh) - max(at, bt)
    iw = min(al + aw, bl + bw) - max(al, bl)
    if ih <= 0 or iw <= 0:
        return 'disjoint'
    inter = ih * iw
    return 'containing' if inter in (ah * aw, bh * bw) else 'overlapping'


def test_pairs_cover_all_three_relations_and_pack():
    """BYOL-style crops give containing, overlapping and disjoint pairs;
    PackInputs carries the (V, 4) boxes into the data sample."""
    np.random.seed(0)
    pipeline = TRANSFORMS.build(dict(
        type='MultiViewWithBoxes', num_views=[1, 1],
        transforms=[[dict(type='RandomResizedCropWithBox', scale=8),
                     dict(type='RandomFlipWithBox', prob=.5)]] * 2))
    pack = TRANSFORMS.build(dict(type='PackInputs',
                                 algorithm_keys=['crop_boxes']))
    img = np.zeros((32, 32, 3), np.uint8)
    seen = set()
    for _ in range(300):
        packed = pack(pipeline(dict(img=img)))
        boxes = packed['data_samples'].crop_boxes
        assert boxes.shape == (2, 4) and boxes.dtype == np.float32
        assert [tuple(v.shape) for v in packed['inputs']] == [(3, 8, 8)] * 2
        tlhw, _, _ = box_to_tlhw(boxes, (32, 32))
        seen.add(relation(*np.round(tlhw)))
    assert seen == {'containing', 'overlapping', 'disjoint'}


def test_multiview_any_number_and_size_of_views():
    """ICPF-style 2 global + 8 local views, boxes in view order."""
    np.random.seed(0)
    glob = [dict(type='RandomResizedCropWithBox', scale=32,
                 crop_ratio_range=(.32, 1.)),
            dict(type='RandomFlipWithBox', prob=.5)]
    loc = [dict(type='RandomResizedCropWithBox', scale=16,
                crop_ratio_range=(.05, .32)),
           dict(type='RandomFlipWithBox', prob=.5)]
    out = MultiViewWithBoxes([glob, loc], num_views=[2, 8])(
        dict(img=ramp_image()))
    assert [v.shape[0] for v in out['img']] == [32] * 2 + [16] * 8
    boxes = torch.as_tensor(out['crop_boxes'])
    assert boxes.shape == (10, 4)
    area = ((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])).abs()
    assert (area[:2] >= .3).all() and (area[2:] <= .33).all()


def test_view_without_box_is_an_error():
    with pytest.raises(KeyError, match="view pipeline 1 .*'crop_box'"):
        MultiViewWithBoxes(
            [[CROP], [dict(type='RandomResizedCrop', scale=8)]],
            num_views=[1, 1])(dict(img=ramp_image()))
