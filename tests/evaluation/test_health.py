"""Collapse monitors: the formulas against brute force, and a collapsed toy
pretraining run flagged where a healthy one is not."""
import itertools
import math

import pytest
import torch

from mmpos.evaluation.health import (collapse_reasons, effective_rank,
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
    # RankMe of a matrix with `rank` equal singular values is `rank`
    q, _ = torch.linalg.qr(torch.randn(64, 16, dtype=torch.float64))
    rows = q[:, :rank] @ torch.eye(rank, 16, dtype=torch.float64)
    assert effective_rank(rows) == pytest.approx(rank, rel=1e-4)


def test_verdict_thresholds():
    initial = dict(cos_within=0.3, cos_across=0.1, eff_rank=50.)
    assert collapse_reasons(dict(initial), initial) == []
    aligned = dict(initial, cos_across=0.85)
    assert 'cos_across' in collapse_reasons(aligned, initial)[0]
    # learning narrows the span: 0.4 x is MAE's best tuning run, 0.2 x not
    assert collapse_reasons(dict(initial, eff_rank=20.), initial) == []
    low_rank = dict(initial, eff_rank=10.)
    assert 'effective rank' in collapse_reasons(low_rank, initial)[0]
    assert collapse_reasons(initial, initial, teacher_entropy=0.2,
                            num_prototypes=256)  # 0.2 / log 256 < 0.1
    assert not collapse_reasons(initial, initial,
                                teacher_entropy=0.9 * math.log(256),
                                num_prototypes=256)


def _toy_run(loss_name, steps=40):
    """A tiny RoPE ViT trained for ``steps`` with a loss that collapses its
    tokens (``'collapse'``: pull every token to the batch mean) or keeps
    them informative (``'reconstruct'``: predict each patch's pixels)."""
    from mmpos.models.backbones import RoPEVisionTransformer
    torch.manual_seed(0)
    arch = dict(embed_dims=32, num_layers=2, num_heads=2,
                feedforward_channels=64)
    vit = RoPEVisionTransformer(arch=arch, img_size=32, patch_size=8,
                                out_type='featmap', with_cls_token=False)
    vit.init_weights()
    decoder = torch.nn.Linear(32, 3 * 8 * 8)
    opt = torch.optim.AdamW([*vit.parameters(), *decoder.parameters()],
                            lr=3e-3)
    images = torch.randn(8, 3, 32, 32, generator=torch.Generator()
                         .manual_seed(1))
    probe = torch.randn(4, 3, 32, 32, generator=torch.Generator()
                        .manual_seed(2))

    def health():
        vit.eval()
        with torch.no_grad():
            out = token_health(vit(probe)[0])
        vit.train()
        return out

    initial = health()
    for _ in range(steps):
        tokens = vit(images)[0].flatten(2).transpose(1, 2)  # (B, N, C)
        if loss_name == 'collapse':
            unit = torch.nn.functional.normalize(tokens, dim=-1)
            loss = -(unit @ unit.flatten(0, 1).mean(0)).mean()
        else:
            patches = images.unfold(2, 8, 8).unfold(3, 8, 8)  # B,3,4,4,8,8
            target = patches.permute(0, 2, 3, 1, 4, 5).flatten(1, 2)
            loss = (decoder(tokens) - target.flatten(2)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return collapse_reasons(health(), initial)


def test_collapsed_toy_run_is_flagged_healthy_one_is_not():
    assert _toy_run('collapse')
    assert _toy_run('reconstruct') == []
