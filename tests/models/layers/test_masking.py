"""Shared MAE-style masking: exact counts, restore indices, position
dropping among the visible tokens, gathering."""
import pytest
import torch

from mmpos.models.layers.masking import (drop_positions, gather_tokens,
                                         naflex_masking, num_kept,
                                         random_masking)


@pytest.mark.parametrize('length,ratio,kept', [
    (196, 0.75, 49), (196, 0., 196), (196, 1., 0), (64, 0.75, 16),
    (16, 0.75, 4), (10, 0.9, 1), (49, 0.75, 12), (49, 0.95, 2)
])
def test_num_kept_is_floor_of_the_visible_share(length, ratio, kept):
    assert num_kept(length, ratio) == kept


def test_num_kept_rejects_bad_ratio():
    with pytest.raises(ValueError, match='mask ratio'):
        num_kept(10, 1.5)


@pytest.mark.parametrize('ratio', [0., 0.25, 0.5, 0.75, 0.95])
def test_random_masking_exact_counts(ratio):
    torch.manual_seed(0)
    out = random_masking(32, 196, ratio)
    keep = num_kept(196, ratio)
    assert out.ids_keep.shape == (32, keep)
    assert out.mask.dtype == torch.bool
    # Eq. 1: exactly (1 - gamma) N visible in every image
    assert (out.mask.sum(1) == 196 - keep).all()
    # kept indices are distinct and exactly the unmasked tokens
    kept_mask = torch.zeros(32, 196, dtype=torch.bool)
    kept_mask.scatter_(1, out.ids_keep, True)
    assert (kept_mask.sum(1) == keep).all()
    assert torch.equal(kept_mask, ~out.mask)


def test_random_masking_from_given_noise_and_restore():
    noise = torch.tensor([[0.9, 0.1, 0.5, 0.3], [0.2, 0.8, 0.4, 0.6]])
    out = random_masking(2, 4, 0.5, noise=noise)
    # lowest noise kept, in ascending-noise order
    assert out.ids_keep.tolist() == [[1, 3], [0, 2]]
    assert out.mask.tolist() == [[True, False, True, False],
                                 [False, True, False, True]]
    # gathering the shuffled sequence with ids_restore gives the original
    x = torch.arange(8.).reshape(2, 4)
    shuffled = x.gather(1, noise.argsort(1))
    assert torch.equal(shuffled.gather(1, out.ids_restore), x)
    with pytest.raises(ValueError, match='noise must have shape'):
        random_masking(2, 5, 0.5, noise=noise)


def test_random_masking_differs_per_image_and_follows_generator():
    gen = torch.Generator().manual_seed(3)
    a = random_masking(8, 64, 0.75, generator=gen).mask
    assert len({tuple(row.tolist()) for row in a}) == 8
    b = random_masking(8, 64, 0.75,
                       generator=torch.Generator().manual_seed(3)).mask
    assert torch.equal(a, b)


@pytest.mark.parametrize('gamma,gamma_pos', [(0.75, 0.75), (0., 0.95),
                                             (0.5, 0.25), (0.75, 1.)])
def test_drop_positions_exact_counts_among_visible(gamma, gamma_pos):
    torch.manual_seed(1)
    ids_keep = random_masking(16, 196, gamma).ids_keep
    dropped = drop_positions(ids_keep, gamma_pos)
    visible = ids_keep.shape[1]
    assert dropped.shape == ids_keep.shape
    # Eq. 2: (1 - gamma_pos)(1 - gamma) N anchors (floored) per image
    anchors = num_kept(visible, gamma_pos)
    assert (dropped.sum(1) == visible - anchors).all()


def test_drop_positions_paper_default_counts():
    ids_keep = random_masking(4, 196, 0.75).ids_keep
    dropped = drop_positions(ids_keep, 0.75)
    assert ids_keep.shape[1] == 49
    assert (dropped.sum(1) == 37).all() and (~dropped).sum(1).eq(12).all()


def test_naflex_masking_keeps_a_share_of_each_samples_valid_tokens():
    valid = torch.zeros(3, 32, dtype=torch.bool)
    for i, n in enumerate((32, 20, 7)):
        valid[i, :n] = True
    kept = naflex_masking(valid, 0.75)
    assert kept.kept_valid.sum(1).tolist() == [8, 5, 1]
    assert valid.gather(1, kept.ids_keep)[kept.kept_valid].all()
    rows = torch.arange(3)[:, None].expand_as(kept.ids_keep)
    is_kept = torch.zeros_like(valid)
    is_kept[rows[kept.kept_valid], kept.ids_keep[kept.kept_valid]] = True
    assert torch.equal(kept.removed, valid & ~is_kept)  # padding: neither
    assert kept.removed.sum(1).tolist() == [24, 15, 6]
    # DropPos' position dropping (Eq. 2) may drop all: no minimum
    assert naflex_masking(valid, 1., min_kept=0).kept_valid.sum() == 0
    assert naflex_masking(valid[2:], 0.9, min_kept=0).removed.sum() == 7


def test_naflex_masking_without_padding_is_random_masking():
    noise = torch.rand(4, 12)
    ref = random_masking(4, 12, 0.75, noise=noise)
    out = naflex_masking(torch.ones(4, 12, dtype=torch.bool), 0.75,
                         noise=noise)
    assert torch.equal(out.ids_keep, ref.ids_keep)
    assert out.kept_valid.all() and torch.equal(out.removed, ref.mask)
    # padding changes nothing of the valid tokens' draw
    padded = torch.cat((noise, torch.rand(4, 5)), 1)
    valid = torch.arange(17) < 12
    out = naflex_masking(valid.expand(4, -1), 0.75, noise=padded)
    assert torch.equal(out.ids_keep, ref.ids_keep)


def test_gather_tokens_batched_and_shared():
    x = torch.arange(2 * 5 * 3.).reshape(2, 5, 3)
    ids = torch.tensor([[4, 0], [2, 2]])
    out = gather_tokens(x, ids)
    assert torch.equal(out[0], x[0, [4, 0]])
    assert torch.equal(out[1], x[1, [2, 2]])
    shared = gather_tokens(x[:1], ids)  # (1, L, C) table for every image
    assert torch.equal(shared[1], x[0, [2, 2]])
    coords = torch.arange(10.).reshape(1, 5, 2)
    assert gather_tokens(coords, ids).shape == (2, 2, 2)
    flat = gather_tokens(torch.arange(10).reshape(2, 5), ids)
    assert flat.tolist() == [[4, 0], [7, 7]]
