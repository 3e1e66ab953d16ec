"""LookHere (Fuller et al., "LookHere: Vision Transformers with Directed
Attention Generalize and Extrapolate", NeurIPS 2024): no rotation; head
``h`` sees only the keys in its field of view (a half plane, quadrant or
45-degree wedge pointing up, down, left or right) and its logits are
penalised by ``slope_h slope_l global_slope d(r_q, r_k)``.
"""
from typing import List, Sequence

import torch
from torch import Tensor

from .base import BiasTable, PositionScheme, check_choice

#: the head directions per field of view, cycled over the heads (LH-180:
#: half planes, LH-90: quadrants, LH-45: 45-degree wedges)
LOOKHERE_FOVS = {
    180: ('up', 'down', 'left', 'right'),
    90: ('up-left', 'up-right', 'down-left', 'down-right'),
    45: ('up-left45', 'down-left45', 'left-up45', 'right-up45',
         'up-right45', 'down-right45', 'left-down45', 'right-down45'),
}
DISTANCES = ('linear', 'sqrt', 'square')


def _fov_visible(dx: Tensor, dy: Tensor, direction: str) -> Tensor:
    """Whether keys at offsets ``(dx, dy) = r_k - r_q`` (``y`` down) lie in
    the field of view, boundaries included (so the query's own position)."""
    half = dict(up=dy <= 0, down=dy >= 0, left=dx <= 0, right=dx >= 0)
    if direction in half:
        return half[direction]
    if direction.endswith('45'):
        # the 90-degree cone around the first direction (|cross offset| <=
        # along offset) cut by the second's half plane
        first, second = direction[:-2].split('-')
        along = dict(up=-dy, down=dy, left=-dx, right=dx)[first]
        cross = dx if first in ('up', 'down') else dy
        return (cross.abs() <= along) & half[second]
    first, second = direction.split('-')
    return half[first] & half[second]


def lookhere_bias(coords: Tensor, directions: Sequence[str], slopes: Tensor,
                  distance: str = 'linear') -> Tensor:
    """The additive bias of coordinates ``(n, M, 2)`` (patch units; ``NaN``:
    bias 0 to and from it) for heads looking in ``directions`` with
    distance penalties ``slopes`` ``(..., heads)`` (e.g. ``(depth, heads)``:
    all blocks at once): ``(..., n, heads, M, M)`` fp32, ``-slope d`` in the
    field of view, else the most negative fp32 (finite: no row is all
    ``-inf``); ``d`` Euclidean, its square root or square."""
    xy = coords.float()
    off = xy[:, None, :, :] - xy[:, :, None, :]  # (n, M_q, M_k, 2)
    dx, dy = off[..., 0], off[..., 1]
    dist = off.norm(dim=-1)
    dist = dict(linear=dist, sqrt=dist.sqrt(),
                square=dist.square())[distance]
    missing = dist.isnan()
    visible = torch.stack([
        _fov_visible(dx, dy, direction) | missing for direction in directions
    ], dim=1)  # (n, heads, M, M)
    slopes = slopes.to(dist)[..., None, :, None, None]  # (.., 1, heads, 1, 1)
    bias = -slopes * dist.nan_to_num(0.)[:, None]
    return bias.masked_fill(~visible, torch.finfo(torch.float32).min)


class LookHere(PositionScheme):
    """LookHere's masks and penalties (:func:`lookhere_bias`), ``fov`` 180,
    90 or 45 (:data:`LOOKHERE_FOVS`), ``distance`` in patches. ``slopes``
    ``(depth, heads)`` (buffer, not saved): ``global_slope`` x block slopes
    linear over ``layer_slopes`` x ``2 ** -(1 + h // 4)`` for head ``h``
    (as LookHere's code)."""
    OPTIONS = ('fov', 'global_slope', 'layer_slopes', 'distance')

    def __init__(self, head_dim, num_heads, depth, fov=180, global_slope=1.,
                 layer_slopes=(1., 1.), distance='linear', coords=None):
        super().__init__(head_dim, num_heads, depth, coords)
        dirs = LOOKHERE_FOVS[check_choice('LookHere fov', fov, LOOKHERE_FOVS)]
        self.fov = fov
        self.distance = check_choice('LookHere distance', distance, DISTANCES)
        self.directions = [dirs[h % len(dirs)] for h in range(num_heads)]
        self.global_slope = float(global_slope)
        self.layer_slopes = tuple(float(v) for v in layer_slopes)
        head_slopes = torch.exp2(-(1. + torch.arange(num_heads) // 4))
        self.register_buffer(
            'slopes', global_slope *
            torch.linspace(*self.layer_slopes, depth)[:, None] * head_slopes,
            persistent=False)

    def block_table(self, index, coords, hw=None) -> BiasTable:
        return BiasTable(lookhere_bias(coords, self.directions,
                                       self.slopes[index], self.distance))

    def tables(self, coords, hw=None, blocks=None) -> List[BiasTable]:
        """As :meth:`PositionScheme.tables`; blocks sharing coordinates share
        one mask and distance computation."""
        if not isinstance(coords, Tensor):
            return super().tables(coords, hw, blocks)
        blocks = list(range(self.depth)) if blocks is None else blocks
        bias = lookhere_bias(coords, self.directions, self.slopes[blocks],
                             self.distance)  # (blocks, n, heads, M, M)
        return [BiasTable(b) for b in bias]
