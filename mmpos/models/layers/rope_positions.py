"""View-consistent patch coordinates of crops (ICPF, CR2PQ)."""
from typing import Optional, Sequence

from torch import Tensor

from .rope import grid_coords


def box_coords(boxes: Tensor, hw: Sequence[int],
               unit_hw: Optional[Sequence[int]] = None) -> Tensor:
    """Patch-unit coordinates that place a view's patches where they came
    from in the source image ("view-consistent" RoPE, used by ICPF and
    CR2PQ with ``view_consistent_rope``).

    A view of ``hw = (h, w)`` patches cropped from box ``(x1, y1, x2, y2)``
    (normalised to ``[0, 1]`` of the source image; ``x1 > x2`` for a
    horizontally flipped view, as ``MultiViewWithBoxes`` records) has patch
    ``(i, j)``'s centre at source fraction ``u = x1 + (j + 0.5) / w (x2 -
    x1)``, ``v`` likewise. Returned as ``x = u W - 0.5``, ``y = v H - 0.5``
    in the patch units of ``unit_hw = (H, W)`` (default: ``hw``, the view's
    own grid), i.e. the source image spread over an ``H x W`` grid: in the
    ``'separate'`` frame of an ``H x W`` grid these are ``2 u - 1``,
    ``2 v - 1``, the same for every view of the image whatever its crop and
    resolution, and a whole-image view keeps its usual grid in any frame.
    Views given one ``unit_hw`` share one patch-unit system too (CR2PQ's
    queries of view B among view A's keys).

    Args:
        boxes: ``(n, 4)`` normalised crop boxes.
        hw: the views' patch grid.
        unit_hw: the grid that sets the units (default ``hw``).

    Returns:
        ``(n, h * w, 2)`` float coordinates ``(x, y)``.
    """
    h, w = hw
    unit_h, unit_w = unit_hw or hw
    grid = grid_coords(h, w, device=boxes.device)  # (N, 2)
    frac = (grid + 0.5) / grid.new_tensor((w, h))
    start, size = boxes[:, None, :2], boxes[:, None, 2:] - boxes[:, None, :2]
    return (start + frac * size) * grid.new_tensor((unit_w, unit_h)) - 0.5
