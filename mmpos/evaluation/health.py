"""Representation-collapse monitors for self-supervised pretraining.

A run whose (teacher) tokens all point the same way, or span only a few
directions, has collapsed even when its loss falls. Three numbers on a fixed
set of probe images tell it:

* ``cos_within`` / ``cos_across``: mean cosine similarity of two distinct
  patch tokens of the same image / of two different images. A random-init
  ViT sits well below 1; tokens collapsing towards one vector drive both
  towards 1.
* ``eff_rank``: the effective rank of the token matrix (RankMe, Garrido et
  al., ICML 2023, Eq. 1): ``exp(-sum_k p_k log p_k)`` with
  ``p_k = s_k / sum_j s_j + eps`` over the singular values ``s_k``; between
  1 (one direction) and ``min(num_tokens, C)``.
* ``teacher_entropy``: for DINO-style heads, the entropy of the teacher's
  batch-mean prototype distribution as the method logs it, divided by its
  maximum ``log K`` (``K`` prototypes).

:func:`collapse_reasons` turns them into a verdict against the same numbers
measured on the run's own starting weights. The rank threshold is low on
purpose: a random-init ViT's tokens span many directions by construction
and a run that learns features narrows them. In the CPU method ranking's
tuning (mini data, 300 iterations) the runs ended at 0.33-1.13 x their
initial rank, every MAE configuration at 0.39-0.56 x with the best linear
probe of all methods (mIoU 28.9-30.8); a toy run trained to pull all
tokens together ends at 0.13 x (``tests/evaluation/test_health.py``).
"""
import math
from typing import Dict, List, Optional

import torch
from torch import Tensor

# Thresholds of :func:`collapse_reasons` (see its docstring).
COS_ACROSS_MAX = 0.8
RANK_RATIO_MIN = 0.25
ENTROPY_RATIO_MIN = 0.1


def token_cosines(tokens: Tensor) -> Dict[str, float]:
    """Mean pairwise cosine of ``tokens`` ``(B, N, C)`` (``B >= 2``,
    ``N >= 2``): ``cos_within`` over the ``N (N - 1)`` ordered pairs of
    distinct tokens of each image, ``cos_across`` over all pairs of tokens
    of two different images."""
    B, N, _ = tokens.shape
    if B < 2 or N < 2:
        raise ValueError(f'token_cosines needs >= 2 images of >= 2 tokens, '
                         f'got {tuple(tokens.shape)}')
    unit = torch.nn.functional.normalize(tokens.double(), dim=-1)
    per_image = unit.sum(dim=1)                        # (B, C)
    total = per_image.sum(dim=0)                       # (C,)
    # sum over ordered pairs (i, j) of <u_i, u_j>, from the sums' squares
    same_image = (per_image * per_image).sum(-1)       # (B,) incl. i == j
    within = (same_image.sum() - B * N) / (B * N * (N - 1))
    across = ((total * total).sum() - same_image.sum()) / (B * (B - 1) * N *
                                                           N)
    return dict(cos_within=float(within), cos_across=float(across))


def effective_rank(tokens: Tensor, eps: float = 1e-7) -> float:
    """RankMe effective rank (Garrido et al. 2023, Eq. 1) of the rows of
    ``tokens`` ``(M, C)`` (or ``(B, N, C)``, flattened to ``B N`` rows)."""
    rows = tokens.reshape(-1, tokens.shape[-1]).double()
    s = torch.linalg.svdvals(rows)
    p = s / s.sum() + eps
    return float(torch.exp(-(p * p.log()).sum()))


def token_health(patch_tokens: Tensor) -> Dict[str, float]:
    """``cos_within``, ``cos_across`` and ``eff_rank`` of a backbone's
    patch tokens ``(B, C, h, w)`` (the layout of
    :func:`mmpos.apis.features.extract_features`)."""
    tokens = patch_tokens.flatten(2).transpose(1, 2)   # (B, h * w, C)
    return dict(**token_cosines(tokens), eff_rank=effective_rank(tokens))


def collapse_reasons(health: Dict[str, float],
                     initial: Dict[str, float],
                     teacher_entropy: Optional[float] = None,
                     num_prototypes: Optional[int] = None) -> List[str]:
    """Why ``health`` (of the trained weights) looks collapsed compared with
    ``initial`` (the same run's starting weights); ``[]`` when healthy.

    A run is flagged when its tokens of different images point the same
    way (``cos_across > 0.8``, and above the initial value), when its
    effective rank fell below 0.25 x the initial one, or when a DINO-style
    teacher's batch-mean distribution covers less than a tenth of the
    ``log K`` nats of ``num_prototypes`` (``teacher_entropy``: the value
    the method logs, in nats).
    """
    reasons = []
    cos = health['cos_across']
    if cos > COS_ACROSS_MAX and cos > initial['cos_across']:
        reasons.append(f'tokens of different images align: cos_across '
                       f'{cos:.2f} > {COS_ACROSS_MAX} (initial '
                       f'{initial["cos_across"]:.2f})')
    rank, rank0 = health['eff_rank'], initial['eff_rank']
    if rank < RANK_RATIO_MIN * rank0:
        reasons.append(f'effective rank {rank:.1f} < {RANK_RATIO_MIN} x '
                       f'initial {rank0:.1f}')
    if teacher_entropy is not None and num_prototypes:
        ratio = teacher_entropy / math.log(num_prototypes)
        if ratio < ENTROPY_RATIO_MIN:
            reasons.append(f'teacher entropy {teacher_entropy:.2f} nats is '
                           f'{ratio:.2f} of log K (K={num_prototypes})')
    return reasons
