"""Patch masks for masked content / position prediction, batched.

* box-wise (iBOT / DINOv2 content masking): rectangles of random area
  (``>= min_patches``) and log-uniform aspect ratio in ``aspect_range``;
* cross-wise (ICPF Fig. 4, position masking): crosses, i.e. a horizontal and
  a vertical one-patch-wide bar through a random centre patch, each arm of
  random half-length in ``[1, ceil(max(h, w) / 2)]`` (our reading of Fig. 4:
  the figure's exact arm lengths are not given in the text).

Each image gets exactly its requested number of masked patches. Shapes are
proposed for all images at once; of a proposal's not yet masked patches at
most the image's remainder is taken, nearest to the shape's centre first
(Chebyshev distance for boxes, Manhattan for crosses), so a cut shape is a
smaller box / cross and the count never overshoots. The loop runs over
proposal rounds (all images in parallel) and stops when every image is
complete; after ``max_rounds`` any remainder is filled with random patches.
Uses the global torch RNG.
"""
import math
from typing import Callable, Sequence, Tuple

import torch
from torch import Tensor


def sample_num_masked(num: int, num_patches: int,
                      ratio_range: Tuple[float, float] = (0.1, 0.5),
                      device=None) -> Tensor:
    """Per-image mask sizes ``round(rho * N)``, ``rho ~ U(ratio_range)``.

    Returns:
        ``(num,)`` long.
    """
    lo, hi = ratio_range
    if not 0 <= lo <= hi <= 1:
        raise ValueError(f'mask ratio_range must satisfy 0 <= lo <= hi <= 1, '
                         f'got {ratio_range}')
    ratios = lo + (hi - lo) * torch.rand(num, device=device)
    return (ratios * num_patches).round().long()


def _grid(hw: Sequence[int], device) -> Tuple[Tensor, Tensor]:
    """Row and column index of each patch, ``(h * w,)`` each."""
    h, w = hw
    idx = torch.arange(h * w, device=device)
    return idx // w, idx % w


def _rand_int(high: Tensor) -> Tensor:
    """Uniform integers in ``[0, high)`` (``high >= 1``), elementwise."""
    return (torch.rand(high.shape, device=high.device) * high).long().clamp(
        max=high - 1)


def _take_nearest(candidates: Tensor, distance: Tensor,
                  budget: Tensor) -> Tensor:
    """Per row, the ``budget`` candidates with the smallest distance.

    Args:
        candidates: ``(n, N)`` bool.
        distance: ``(n, N)`` float (ties broken by the caller).
        budget: ``(n,)`` long.
    """
    key = distance.masked_fill(~candidates, float('inf'))
    rank = key.argsort(dim=1).argsort(dim=1)
    return candidates & (rank < budget[:, None])


def box_proposals(remaining: Tensor, hw: Sequence[int], min_patches: int,
                  aspect_range: Tuple[float, float]) -> Tuple[Tensor, Tensor]:
    """One random box per image with area in ``[min_patches, remaining]``.

    Returns:
        ``(n, N)`` bool box masks and ``(n, N)`` Chebyshev distances (in
        box-normalised units) to the box centre.
    """
    h, w = hw
    device = remaining.device
    low = torch.full_like(remaining, min_patches).float()
    area = low + torch.rand(remaining.shape, device=device) * (
        remaining.float() - low).clamp_min(0)
    log_lo, log_hi = math.log(aspect_range[0]), math.log(aspect_range[1])
    aspect = torch.exp(log_lo + (log_hi - log_lo) *
                       torch.rand(remaining.shape, device=device))
    box_h = torch.sqrt(area * aspect).round().long().clamp(1, h)
    box_w = torch.sqrt(area / aspect).round().long().clamp(1, w)
    top = _rand_int(h - box_h + 1)
    left = _rand_int(w - box_w + 1)
    rows, cols = _grid(hw, device)
    dy = (rows[None] - top[:, None]).float() + .5 - box_h[:, None] / 2
    dx = (cols[None] - left[:, None]).float() + .5 - box_w[:, None] / 2
    inside = (dy.abs() < box_h[:, None] / 2) & (dx.abs() < box_w[:, None] / 2)
    distance = torch.maximum((dy / box_h[:, None]).abs(),
                             (dx / box_w[:, None]).abs())
    return inside, distance


def cross_shapes(centres: Tensor, arms: Tensor,
                 hw: Sequence[int]) -> Tuple[Tensor, Tensor]:
    """Crosses: row ``cy`` within ``|x - cx| <= ax`` and column ``cx`` within
    ``|y - cy| <= ay``.

    Args:
        centres: ``(n, 2)`` long ``(cy, cx)``.
        arms: ``(n, 2)`` long half-lengths ``(ay, ax)``.

    Returns:
        ``(n, N)`` bool cross masks and ``(n, N)`` Manhattan distances to the
        centre.
    """
    rows, cols = _grid(hw, centres.device)
    dy = (rows[None] - centres[:, :1]).abs()
    dx = (cols[None] - centres[:, 1:]).abs()
    inside = ((dy == 0) & (dx <= arms[:, 1:])) | ((dx == 0) &
                                                  (dy <= arms[:, :1]))
    return inside, (dy + dx).float()


def cross_proposals(remaining: Tensor,
                    hw: Sequence[int]) -> Tuple[Tensor, Tensor]:
    """One random cross per image (see the module docstring)."""
    h, w = hw
    n = remaining.shape[0]
    size = torch.tensor([h, w], device=remaining.device)
    centres = _rand_int(size.expand(n, 2))
    max_arm = math.ceil(max(h, w) / 2)
    arms = 1 + _rand_int(torch.full((n, 2), max_arm,
                                    device=remaining.device))
    return cross_shapes(centres, arms, hw)


def _grow_masks(num_masked: Tensor, hw: Sequence[int],
                propose: Callable[[Tensor], Tuple[Tensor, Tensor]],
                max_rounds: int) -> Tensor:
    """Add proposed shapes until each image has ``num_masked`` patches."""
    h, w = hw
    num_patches = h * w
    if bool((num_masked < 0).any()) or bool((num_masked > num_patches).any()):
        raise ValueError(f'num_masked must lie in [0, {num_patches}], got '
                         f'{num_masked.tolist()}')
    mask = torch.zeros(num_masked.shape[0], num_patches, dtype=torch.bool,
                       device=num_masked.device)
    for _ in range(max_rounds):
        remaining = num_masked - mask.sum(dim=1)
        if not bool((remaining > 0).any()):
            return mask
        shape, distance = propose(remaining)
        tie_break = 1e-3 * torch.rand(distance.shape, device=distance.device)
        mask |= _take_nearest(shape & ~mask, distance + tie_break, remaining)
    remaining = num_masked - mask.sum(dim=1)
    return mask | _take_nearest(~mask, torch.rand(mask.shape,
                                                  device=mask.device),
                                remaining)


def boxwise_masks(num_masked: Tensor,
                  hw: Sequence[int],
                  min_patches: int = 4,
                  aspect_range: Tuple[float, float] = (0.3, 1 / 0.3),
                  max_rounds: int = 64) -> Tensor:
    """Box-wise block masks (iBOT / DINOv2).

    Args:
        num_masked: ``(n,)`` masked patches per image.
        hw: patch grid ``(h, w)``.

    Returns:
        ``(n, h * w)`` bool, row-major, ``True`` = masked.
    """
    return _grow_masks(
        num_masked, hw,
        lambda rem: box_proposals(rem, hw, min_patches, aspect_range),
        max_rounds)


def crosswise_masks(num_masked: Tensor,
                    hw: Sequence[int],
                    max_rounds: int = 64) -> Tensor:
    """Cross-wise masks (ICPF Fig. 4); arguments as :func:`boxwise_masks`."""
    return _grow_masks(num_masked, hw, lambda rem: cross_proposals(rem, hw),
                       max_rounds)


MASKINGS = dict(box=boxwise_masks, cross=crosswise_masks)
