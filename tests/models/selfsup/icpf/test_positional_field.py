"""Positional vector field (crop + bilinear sampling, §3.2.1), position and
scale augmentation (§3.2.2) and the box-wise / cross-wise masks (Fig. 4)."""
import pytest
import torch
import torch.nn.functional as F

from mmpos.models.layers.block_masking import (boxwise_masks, cross_shapes,
                                               crosswise_masks,
                                               sample_num_masked)
from mmpos.models.selfsup.icpf.positional_field import (PositionalField,
                                                  field_to_pos_embed,
                                                  sample_field, sample_scales,
                                                  scale_shift_boxes)

FULL = torch.tensor([[0., 0., 1., 1.]], dtype=torch.float64)


@pytest.mark.parametrize('size,grid', [((50, 50), (14, 14)),
                                       ((19, 19), (14, 14)),
                                       ((50, 40), (7, 5)), ((4, 4), (9, 9))])
def test_full_image_crop_equals_resize(size, grid):
    torch.manual_seed(0)
    field = torch.randn(1, 6, *size, dtype=torch.float64)
    sampled = sample_field(field, FULL, grid)
    resized = F.interpolate(field, size=grid, mode='bilinear',
                            align_corners=False)
    assert sampled.shape == (1, grid[0] * grid[1], 6)
    assert torch.allclose(sampled, resized.flatten(2).transpose(1, 2),
                          atol=1e-10)


def test_crop_by_hand_and_flip():
    field = torch.arange(16.).view(1, 1, 4, 4)
    # The top-left quarter on a 2x2 grid: patch centres (1/8, 3/8) are the
    # field's cell centres, so the crop is field[:2, :2] exactly.
    top_left = sample_field(field, torch.tensor([[0., 0., .5, .5]]), (2, 2))
    assert top_left.flatten().tolist() == [0., 1., 4., 5.]
    # x1 > x2: a horizontally flipped view reads the field right to left.
    flipped = sample_field(field, torch.tensor([[.5, 0., 0., .5]]), (2, 2))
    assert flipped.flatten().tolist() == [1., 0., 5., 4.]
    # Half-cell shift: bilinear average of two neighbours.
    mid = sample_field(field, torch.tensor([[.125, 0., .375, .25]]), (1, 1))
    assert mid.item() == pytest.approx(0.5)


def test_batched_sampling_matches_single_boxes():
    torch.manual_seed(0)
    field = torch.randn(1, 3, 10, 10)
    boxes = torch.tensor([[0., 0., 1., 1.], [.2, .1, .6, .9],
                          [.9, .3, .4, .5]])
    batched = sample_field(field, boxes, (3, 4))
    singles = torch.cat([sample_field(field, b[None], (3, 4)) for b in boxes])
    assert torch.allclose(batched, singles)


def test_field_module_and_pos_embed_export():
    torch.manual_seed(0)
    module = PositionalField(8, size=19)
    module.init_weights()
    assert module.field.shape == (1, 8, 19, 19)
    assert 0 < module.field.std() < .05
    cls_pos = torch.randn(1, 1, 8)
    pos = module.to_pos_embed((4, 4), cls_pos)
    assert pos.shape == (1, 17, 8)
    assert torch.equal(pos[:, :1], cls_pos)
    assert torch.allclose(pos[:, 1:], module(FULL.float(), (4, 4)))
    assert torch.allclose(field_to_pos_embed(module.field, (4, 4)),
                          pos[:, 1:])
    boxes = torch.rand(5, 4)
    out = module(boxes, (3, 3))
    out.sum().backward()
    assert out.shape == (5, 9, 8) and module.field.grad.abs().sum() > 0
    with pytest.raises(ValueError, match='size'):
        PositionalField(8, size=(0, 3))
    with pytest.raises(ValueError, match=r'\(B, 4\)'):
        sample_field(module.field, torch.rand(2, 3), (2, 2))


def test_beta_scales_within_bounds():
    torch.manual_seed(0)
    s = sample_scales(20000, 'beta', (0.2, 1.0), (2., 5.))
    assert s.min() >= 0.2 and s.max() <= 1.0
    # mean of Beta(2, 5) is 2/7
    assert s.mean().item() == pytest.approx(0.2 + 0.8 * 2 / 7, abs=0.01)
    u = sample_scales(20000, 'uniform', (0.3, 0.6))
    assert u.min() >= 0.3 and u.max() <= 0.6
    assert u.mean().item() == pytest.approx(0.45, abs=0.01)
    assert torch.equal(sample_scales(3, 'const', (0.2, 1.0)),
                       torch.ones(3))
    with pytest.raises(ValueError, match='distribution'):
        sample_scales(3, 'gauss')
    with pytest.raises(ValueError, match='scale_range'):
        sample_scales(3, 'beta', (0., 1.))


def test_scale_shift_boxes_geometry():
    torch.manual_seed(0)
    boxes = torch.tensor([[[.1, .2, .5, .6], [.7, .4, .3, .8]],
                          [[0., 0., 1., 1.], [.2, .2, .4, .4]]])
    scales = torch.tensor([.04, .25])
    out = scale_shift_boxes(boxes, scales)
    corners = out.view(2, -1, 2)
    lo, hi = corners.amin(1), corners.amax(1)
    # the enclosing rectangle now has area s and lies inside the image
    assert torch.allclose((hi - lo).prod(-1), scales, atol=1e-6)
    assert lo.min() >= 0 and hi.max() <= 1 + 1e-6
    # one similarity per image: box sizes scale by the same factor, flips
    # (x1 > x2) are kept, relative offsets are preserved
    size_in = boxes[..., 2:] - boxes[..., :2]
    size_out = out[..., 2:] - out[..., :2]
    ratio = size_out / size_in
    assert torch.allclose(ratio, ratio[:, :1, :1].expand_as(ratio), atol=1e-5)
    # image 0: A = [.1, .7] x [.2, .8], |A| = .36 -> factor sqrt(.04/.36)
    assert torch.allclose(ratio[0, 0, 0], torch.tensor(1 / 3), atol=1e-5)
    # too elongated for area s: shrunk to fit (width 1) instead
    wide = torch.tensor([[[0., .45, 1., .55]]])
    fitted = scale_shift_boxes(wide, torch.tensor([1.]))
    assert torch.allclose(fitted[0, 0, [0, 2]], torch.tensor([0., 1.]))
    with pytest.raises(ValueError, match=r'\(B, V, 4\)'):
        scale_shift_boxes(boxes[0], scales)


def _full_2x2_blocks(masks, hw):
    grid = masks.view(-1, *hw).float()
    return (F.avg_pool2d(grid[:, None], 2, stride=1) == 1).sum().item()


@pytest.mark.parametrize('masking', [boxwise_masks, crosswise_masks])
def test_masks_have_exact_counts(masking):
    torch.manual_seed(0)
    counts = sample_num_masked(64, 196, (0.1, 0.5))
    assert counts.min() >= round(.1 * 196) and counts.max() <= round(.5 * 196)
    masks = masking(counts, (14, 14))
    assert masks.shape == (64, 196) and masks.dtype == torch.bool
    assert torch.equal(masks.sum(1), counts)
    assert not masking(torch.zeros(3).long(), (4, 4)).any()
    assert masking(torch.full((2, ), 16), (4, 4)).all()
    with pytest.raises(ValueError, match='num_masked'):
        masking(torch.tensor([17]), (4, 4))


def test_cross_shape_by_hand():
    masks, dist = cross_shapes(torch.tensor([[2, 1]]), torch.tensor([[1, 2]]),
                               (5, 5))
    expected = torch.tensor([[0, 0, 0, 0, 0],
                             [0, 1, 0, 0, 0],
                             [1, 1, 1, 1, 0],
                             [0, 1, 0, 0, 0],
                             [0, 0, 0, 0, 0]]).bool()
    assert torch.equal(masks.view(5, 5), expected)
    assert dist.view(5, 5)[2, 3].item() == 2


def test_cross_masks_are_bars_box_masks_are_blocks():
    torch.manual_seed(0)
    counts = torch.full((64, ), 40)
    cross = crosswise_masks(counts, (14, 14))
    box = boxwise_masks(counts, (14, 14))
    # crosses are one patch wide: 2x2 fully masked blocks only where bars
    # run side by side; boxes are made of them
    assert _full_2x2_blocks(cross, (14, 14)) < \
        0.25 * _full_2x2_blocks(box, (14, 14))
    # a cross-wise mask cut to 5 patches is a plus (or its clipped part)
    small = crosswise_masks(torch.full((200, ), 5), (9, 9)).view(-1, 9, 9)
    rows, cols = small.any(2).sum(1), small.any(1).sum(1)
    assert ((rows == 1) | (cols == 1) | (rows + cols <= 6)).all()
