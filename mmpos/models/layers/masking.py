"""Random token masking with exact counts (MAE shuffle), batched.

* :func:`random_masking`: MAE-style per-sample shuffle: ``argsort`` of
  uniform noise, the first ``num_kept(L, ratio)`` shuffled indices are kept.
  Returns the kept indices (in shuffled, i.e. random, order), the indices
  that undo the shuffle and the binary mask (``True`` = removed).
* :func:`drop_positions`: the second masking of DropPos (Eq. 2, Alg. 1):
  the same operation applied to the ``K`` visible tokens, giving the tokens
  whose position embedding is dropped.
* :func:`naflex_masking`: the same shuffle on padded sequences of
  different lengths (NaFlex batches): each sample keeps its own count of
  its own valid tokens, padding is never kept.
* :func:`gather_tokens`: ``(B, L, ...)`` -> ``(B, K, ...)`` by indices.

Every image gets exactly the same count (Eq. 1 / Eq. 2), so the results
stack into dense tensors; no Python loop over images or tokens (NaFlex:
the kept sequences are padded to the longest, with a mask). Uses the
global torch RNG unless ``noise`` or a ``generator`` is given.
"""
import math
from typing import NamedTuple, Optional

import torch
from torch import Tensor


class Masking(NamedTuple):
    """Result of :func:`random_masking`.

    Attributes:
        ids_keep: ``(B, K)`` long, kept token indices (random order).
        ids_restore: ``(B, L)`` long, position of every token in the
            shuffled order; ``gather(cat([kept, removed]), ids_restore)``
            restores the original order.
        mask: ``(B, L)`` bool, ``True`` = removed (exactly ``L - K`` per row).
    """
    ids_keep: Tensor
    ids_restore: Tensor
    mask: Tensor


def num_kept(length: int, ratio: float) -> int:
    """Tokens kept when ``ratio`` of ``length`` are removed:
    ``floor((1 - ratio) * length)`` (MAE's rule), evaluated with a 1e-6
    tolerance so that e.g. ``(1 - 0.9) * 10`` keeps 1, not 0."""
    if not 0. <= ratio <= 1.:
        raise ValueError(f'mask ratio must lie in [0, 1], got {ratio}')
    return min(length, math.floor((1. - ratio) * length + 1e-6))


def random_masking(batch_size: int,
                   length: int,
                   ratio: float,
                   device=None,
                   noise: Optional[Tensor] = None,
                   generator: Optional[torch.Generator] = None) -> Masking:
    """Remove ``length - num_kept(length, ratio)`` random tokens per sample.

    Args:
        batch_size: ``B``.
        length: tokens per sample ``L``.
        ratio: removed fraction (``gamma`` of Eq. 1).
        noise: optional ``(B, L)`` scores; the lowest are kept (for tests
            and reproducible evaluation). Drawn uniformly otherwise.
        generator: RNG for the noise.
    """
    keep = num_kept(length, ratio)
    if noise is None:
        noise = torch.rand(batch_size, length, device=device,
                           generator=generator)
    elif noise.shape != (batch_size, length):
        raise ValueError(f'noise must have shape {(batch_size, length)}, got '
                         f'{tuple(noise.shape)}')
    ids_shuffle = noise.argsort(dim=1)
    ids_restore = ids_shuffle.argsort(dim=1)
    mask = ids_restore >= keep
    return Masking(ids_shuffle[:, :keep], ids_restore, mask)


def drop_positions(ids_keep: Tensor,
                   ratio: float,
                   noise: Optional[Tensor] = None,
                   generator: Optional[torch.Generator] = None) -> Tensor:
    """Which visible tokens lose their position embedding (Eq. 2).

    Args:
        ids_keep: ``(B, K)`` visible tokens (from :func:`random_masking`).
        ratio: ``gamma_pos``; ``K - num_kept(K, ratio)`` are dropped per
            sample.
        noise: optional ``(B, K)`` scores; the highest are dropped.

    Returns:
        ``(B, K)`` bool, ``True`` = position dropped (``1 - M_pos``), aligned
        with ``ids_keep``.
    """
    batch_size, length = ids_keep.shape
    return random_masking(batch_size, length, ratio, ids_keep.device, noise,
                          generator).mask


class NaFlexMasking(NamedTuple):
    """Result of :func:`naflex_masking`.

    Attributes:
        ids_keep: ``(B, K)`` long, ``K = max_b K_b``: row ``b`` holds its
            ``K_b`` kept token indices (random order), then indices of
            padding.
        kept_valid: ``(B, K)`` bool, ``True`` for the first ``K_b`` entries
            of row ``b`` (``False``: padding of the kept sequence).
        removed: ``(B, L)`` bool, ``True`` for the valid tokens not kept.
    """
    ids_keep: Tensor
    kept_valid: Tensor
    removed: Tensor


def naflex_masking(valid: Tensor,
                   ratio: float,
                   min_kept: int = 1,
                   noise: Optional[Tensor] = None,
                   generator: Optional[torch.Generator] = None
                   ) -> NaFlexMasking:
    """Remove ``ratio`` of each sample's own valid tokens (padded batches).

    Sample ``b`` with ``n_b`` valid tokens keeps ``K_b = min(n_b,
    max(min_kept, num_kept(n_b, ratio)))`` of them, drawn as
    :func:`random_masking` draws them (the lowest ``noise`` among its valid
    tokens); padding is never kept. On a batch without padding it keeps
    what :func:`random_masking` keeps from the same noise (``min_kept``
    aside).

    Args:
        valid: ``(B, L)`` bool, ``False`` for padding.
        ratio: removed fraction of each sample's valid tokens.
        min_kept: the least kept per sample (1: an encoder needs a token;
            0 for DropPos' position dropping, Eq. 2, where all may go).
        noise: optional ``(B, L)`` scores in ``[0, 1)``; drawn uniformly
            otherwise.
        generator: RNG for the noise.
    """
    if not 0. <= ratio <= 1.:
        raise ValueError(f'mask ratio must lie in [0, 1], got {ratio}')
    batch_size, length = valid.shape
    n = valid.sum(1)
    keep_n = ((1. - ratio) * n.double() + 1e-6).floor().long()
    keep_n = keep_n.clamp(min=min_kept).minimum(n)
    if noise is None:
        noise = torch.rand(batch_size, length, device=valid.device,
                           generator=generator)
    elif noise.shape != valid.shape:
        raise ValueError(f'noise must have shape {tuple(valid.shape)}, got '
                         f'{tuple(noise.shape)}')
    order = noise.masked_fill(~valid, float('inf')).argsort(dim=1)
    kept = int(keep_n.max())
    kept_valid = torch.arange(kept, device=valid.device) < keep_n[:, None]
    removed = valid & (order.argsort(dim=1) >= keep_n[:, None])
    return NaFlexMasking(order[:, :kept], kept_valid, removed)


def gather_tokens(x: Tensor, ids: Tensor) -> Tensor:
    """``x[b, ids[b]]`` for ``x`` of shape ``(B | 1, L, *rest)`` and ``ids``
    of shape ``(B, K)``; returns ``(B, K, *rest)``."""
    if x.shape[0] == 1 and ids.shape[0] > 1:
        return x[0][ids]
    index = ids.reshape(*ids.shape, *([1] * (x.dim() - 2)))
    return x.gather(1, index.expand(*ids.shape, *x.shape[2:]))
