"""Relative coordinates of one view's patches in another view's grid (CR2PQ
Eq. 3-4, Listing 1).

View ``A``'s patch grid is the coordinate system (Eq. 3): its patch in row
``i``, column ``j`` sits at ``(x, y) = (j, i)`` (``grid_coords`` of
:mod:`mmpos.models.layers.positions`: ``x`` = column, ``y`` = row, unit = one of
A's patches). Eq. 4 places the patches of view ``B`` in that system from the
two crop boxes. Boxes follow :mod:`mmpos.datasets.transforms.crop_boxes`:
``(x1, y1, x2, y2)`` in source-image units, ``x1 > x2`` / ``y1 > y2`` for a
horizontally / vertically flipped view; only ratios enter, so pixel boxes
work as well.

``align`` picks the point of a patch that carries its coordinate:

* ``'corner'``: the displayed top-left corner, exactly Eq. 4 / Listing 1:
  ``row(m) = K_A^H (p_Bi - p_Ai) / p_Ah + m * (p_Bh / K_B^H) / (p_Ah / K_A^H)``
  (``m`` 0-based, i.e. the paper's ``m - 1``), columns alike.
* ``'center'`` (default): the patch centre, ``row(m) = K_A^H (c_B(m) -
  p_Ai) / p_Ah - 1/2`` with ``c_B(m)`` the source row of the centre of B's
  patch ``m``. Without flips this is Eq. 4 shifted by ``(s - 1) / 2`` with
  ``s = (p_Bh / K_B^H) / (p_Ah / K_A^H)``, i.e. equal to it when both views
  have the same patch scale. It is the convention under which a flipped view
  lands on the right patches (with corners, a patch's displayed left edge is
  its physical right edge) and B's patches are centred on the content they
  see when the scales differ.

With ``B == A`` both give A's integer grid (Eq. 3).
"""
from typing import Sequence

import torch
from torch import Tensor

ALIGNS = ('center', 'corner')


def _axis(lo_a: Tensor, hi_a: Tensor, lo_b: Tensor, hi_b: Tensor, k_a: int,
          k_b: int, offset: float) -> Tensor:
    """One axis: ``(..., k_b)`` positions of B's patches in A's units."""
    frac = (torch.arange(k_b, device=lo_b.device, dtype=lo_b.dtype) +
            offset) / k_b
    src = lo_b[..., None] + frac * (hi_b - lo_b)[..., None]
    return (src - lo_a[..., None]) / (hi_a - lo_a)[..., None] * k_a - offset


def relative_coords(boxes_a: Tensor,
                    boxes_b: Tensor,
                    grid_a: Sequence[int],
                    grid_b: Sequence[int],
                    align: str = 'center') -> Tensor:
    """Positions of B's patch tokens in A's patch grid (Eq. 4).

    Args:
        boxes_a, boxes_b: ``(..., 4)`` crop boxes of the views (see the module
            docstring), e.g. ``(B, 4)`` for a batch.
        grid_a: ``(K_A^H, K_A^W)``, A's patch grid (student).
        grid_b: ``(K_B^H, K_B^W)``, B's grid (the teacher's output grid).
        align: ``'center'`` or ``'corner'`` (Eq. 4 as printed).

    Returns:
        ``(..., K_B^H * K_B^W, 2)`` ``(x, y)`` = (column, row) in A's patch
        units, B's tokens in row-major order; ready as RoPE ``coords``.
    """
    if align not in ALIGNS:
        raise ValueError(f'align must be one of {ALIGNS}, got {align!r}')
    if boxes_a.shape[-1] != 4 or boxes_b.shape[-1] != 4:
        raise ValueError(f'boxes must be (..., 4), got {tuple(boxes_a.shape)}'
                         f' and {tuple(boxes_b.shape)}')
    boxes_a, boxes_b = torch.broadcast_tensors(boxes_a.float(),
                                               boxes_b.float())
    offset = .5 if align == 'center' else 0.
    (ka_h, ka_w), (kb_h, kb_w) = grid_a, grid_b
    ax1, ay1, ax2, ay2 = boxes_a.unbind(-1)
    bx1, by1, bx2, by2 = boxes_b.unbind(-1)
    xs = _axis(ax1, ax2, bx1, bx2, ka_w, kb_w, offset)  # (..., K_B^W)
    ys = _axis(ay1, ay2, by1, by2, ka_h, kb_h, offset)  # (..., K_B^H)
    xs, ys = torch.broadcast_tensors(xs[..., None, :], ys[..., :, None])
    return torch.stack((xs, ys), dim=-1).flatten(-3, -2)


__all__ = ['ALIGNS', 'relative_coords']
