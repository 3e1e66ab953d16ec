"""Collapse monitors: the formulas against brute force, the centring, and
the rule's calibration on toy runs (the measurements in the docstring of
:mod:`mmpos.evaluation.health`): a complete and a dimensional collapse are
flagged, a healthy run is not, nor the healthy run with a large direction
shared by all its tokens, which the un-centred cosine read as collapse."""
import itertools
import math

import pytest
import torch

from mmpos.evaluation.health import (RANK_RATIO_MIN, SPREAD_RATIO_MIN,
                                     collapse_reasons, effective_rank,
                                     token_cosines, token_health)


def test_token_cosines_equal_brute_force():
    tokens = torch.randn(3, 5, 8, generator=torch.Generator().manual_seed(0))
    unit = torch.nn.functional.normalize(tokens.double(), dim=-1)
    within = [unit[b, i] @ unit[b, j] for b in range(3)
              for i, j in itertools.permutations(range(5), 2)]
    across = [unit[a, i] @ unit[b, j]
              for a, b in itertools.permutations(range(3), 2)
              for i in range(5) for j in range(5)]
    got = token_cosines(tokens)
    assert got['cos_within'] == pytest.approx(float(sum(within)) /
                                              len(within), abs=1e-12)
    assert got['cos_across'] == pytest.approx(float(sum(across)) /
                                              len(across), abs=1e-12)


def test_token_cosines_of_identical_tokens_are_one():
    tokens = torch.randn(1, 1, 6).expand(4, 7, 6)
    got = token_cosines(tokens)
    assert got['cos_within'] == pytest.approx(1.0)
    assert got['cos_across'] == pytest.approx(1.0)


@pytest.mark.parametrize('rank', [1, 3, 10])
def test_effective_rank_counts_equal_directions(rank):
    # the effective rank of a matrix with `rank` equal singular values
    q, _ = torch.linalg.qr(torch.randn(64, 16, dtype=torch.float64))
    rows = q[:, :rank] @ torch.eye(rank, 16, dtype=torch.float64)
    assert effective_rank(rows) == pytest.approx(rank, rel=1e-4)
    assert effective_rank(torch.zeros(64, 16)) == 0.0


def test_token_health_is_of_tokens_centred_on_the_batch_mean():
    patch = torch.randn(3, 8, 2, 3, generator=torch.Generator()
                        .manual_seed(0)).double()       # (B, C, h, w)
    tokens = patch.flatten(2).transpose(1, 2)           # (B, N, C)
    mean = sum(tokens[b, n] for b in range(3) for n in range(6)) / 18
    centred = tokens - mean
    got = token_health(patch)
    assert got == pytest.approx(dict(
        spread=math.sqrt(float(centred.pow(2).sum() / tokens.pow(2).sum())),
        eff_rank=effective_rank(centred.reshape(18, 8)),
        **token_cosines(centred)), abs=1e-12)
    # a direction shared by every token changes nothing but the spread
    shared = token_health(patch + 100 * torch.randn(1, 8, 1, 1).double())
    assert shared['spread'] < got['spread'] / 10
    assert {k: v for k, v in shared.items() if k != 'spread'} == \
        pytest.approx({k: v for k, v in got.items() if k != 'spread'},
                      abs=1e-9)


def test_centred_cos_across_follows_cos_within_for_equal_norms():
    """The docstring's identity: centred tokens sum to zero, so with equal
    norms cos_across = -(1 + (N - 1) cos_within) / ((B - 1) N)."""
    half = torch.nn.functional.normalize(
        torch.randn(2, 5, 4, generator=torch.Generator().manual_seed(0)),
        dim=-1)
    tokens = torch.cat([half, -half])                   # mean 0, norms 1
    got = token_health(tokens.transpose(1, 2).unsqueeze(-1))
    B, N = 4, 5
    assert got['cos_across'] == pytest.approx(
        -(1 + (N - 1) * got['cos_within']) / ((B - 1) * N), abs=1e-12)


@pytest.mark.parametrize('value', [0, 1])
def test_identical_tokens_are_flagged(value):
    # integer channels: the mean token is exact, the centred tokens zero
    token = value * torch.randint(-3, 4, (1, 8, 1, 1)).double()
    same = token_health(token.expand(4, 8, 3, 3))
    assert same == dict(spread=0.0, eff_rank=0.0, cos_within=0.0,
                        cos_across=0.0)
    initial = token_health(torch.randn(4, 8, 3, 3))
    reasons = collapse_reasons(same, initial)
    assert 'one point' in reasons[0] and 'few directions' in reasons[1]


def test_verdict_thresholds():
    initial = dict(spread=0.8, eff_rank=50., cos_within=0.3, cos_across=0.)
    assert collapse_reasons(dict(initial), initial) == []
    # a tenth of the initial spread / rank is the line
    assert collapse_reasons(dict(initial, spread=0.081), initial) == []
    point = collapse_reasons(dict(initial, spread=0.079), initial)
    assert point == ['tokens collapse to one point: spread 0.079 < 0.1 x '
                     'initial 0.800']
    assert collapse_reasons(dict(initial, eff_rank=5.1), initial) == []
    few = collapse_reasons(dict(initial, eff_rank=4.9), initial)
    assert few == ['tokens span few directions: effective rank 4.9 < 0.1 '
                   'x initial 50.0']
    assert collapse_reasons(initial, initial, teacher_entropy=0.2,
                            num_prototypes=256)  # 0.2 / log 256 < 0.1
    assert not collapse_reasons(initial, initial,
                                teacher_entropy=0.9 * math.log(256),
                                num_prototypes=256)


def _toy_run(loss_name, steps=40):
    """A tiny RoPE ViT trained ``steps`` AdamW steps on fresh noise images
    with a loss that collapses its tokens to one point (``'point'``: each
    token's cosine with the batch's mean direction maximised) or into two
    directions (``'subspace'``: the share of the centred token energy
    outside the top 2 singular directions minimised), or keeps them
    informative (``'reconstruct'``: each patch's pixels predicted).
    Returns the health of the random init and of the trained weights on
    4 fixed probe images, and the trained probe tokens ``(B, C, h, w)``."""
    from mmpos.models.backbones import RoPEVisionTransformer
    torch.manual_seed(0)
    arch = dict(embed_dims=32, num_layers=2, num_heads=2,
                feedforward_channels=64)
    vit = RoPEVisionTransformer(arch=arch, img_size=32, patch_size=8,
                                out_type='featmap', with_cls_token=False)
    vit.init_weights()
    decoder = torch.nn.Linear(32, 3 * 8 * 8)
    opt = torch.optim.AdamW([*vit.parameters(), *decoder.parameters()],
                            lr=1e-2)
    data = torch.Generator().manual_seed(1)
    probe = torch.randn(4, 3, 32, 32, generator=torch.Generator()
                        .manual_seed(2))

    def probe_tokens():
        vit.eval()
        with torch.no_grad():
            out = vit(probe)[0]
        vit.train()
        return out

    initial = token_health(probe_tokens())
    for _ in range(steps):
        images = torch.randn(8, 3, 32, 32, generator=data)
        tokens = vit(images)[0].flatten(2).transpose(1, 2)  # (B, N, C)
        if loss_name == 'point':
            unit = torch.nn.functional.normalize(tokens, dim=-1)
            loss = -(unit @ unit.flatten(0, 1).mean(0)).mean()
        elif loss_name == 'subspace':
            rows = tokens.flatten(0, 1)
            s = torch.linalg.svdvals(rows - rows.mean(0))
            loss = s[2:].pow(2).sum() / s.pow(2).sum()
        else:
            patches = images.unfold(2, 8, 8).unfold(3, 8, 8)  # B,3,4,4,8,8
            target = patches.permute(0, 2, 3, 1, 4, 5).flatten(1, 2)
            loss = (decoder(tokens) - target.flatten(2)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    final = probe_tokens()
    return initial, token_health(final), final


def test_toy_collapses_are_flagged_each_by_its_own_check():
    initial, final, _ = _toy_run('point')
    assert final['spread'] < SPREAD_RATIO_MIN * initial['spread']
    # centring leaves the collapsed tokens' residue, which spans as much
    assert final['eff_rank'] > 0.5 * initial['eff_rank']
    assert [r.split(':')[0] for r in collapse_reasons(final, initial)] == [
        'tokens collapse to one point']
    initial, final, _ = _toy_run('subspace')
    assert final['eff_rank'] < RANK_RATIO_MIN * initial['eff_rank']
    assert final['spread'] > 0.5 * initial['spread']
    assert [r.split(':')[0] for r in collapse_reasons(final, initial)] == [
        'tokens span few directions']


def test_toy_healthy_run_is_not_flagged_with_a_large_shared_direction():
    initial, final, tokens = _toy_run('reconstruct')
    assert collapse_reasons(final, initial) == []
    # the same tokens plus a direction 5 x the RMS of the centred tokens
    rows = tokens.flatten(2).transpose(1, 2).flatten(0, 1).double()
    rms = (rows - rows.mean(0)).pow(2).sum(-1).mean().sqrt()
    direction = torch.nn.functional.normalize(
        torch.randn(32, generator=torch.Generator().manual_seed(3)), dim=0)
    shared = tokens.double() + 5 * rms * direction.double().view(1, -1, 1, 1)
    raw = token_cosines(shared.flatten(2).transpose(1, 2))
    assert raw['cos_across'] > 0.8  # what the un-centred rule flagged
    assert collapse_reasons(token_health(shared), initial) == []
