"""Where RoPE puts the patches: coordinate frames and train-time coordinate
augmentation (DINOv3, Simeoni et al. 2025, Sec. "RoPE" and its code's
``RopePositionEmbedding``).

Coordinates enter as ``(x, y)`` in patch units (patch ``(i, j)`` of the
grid at ``x = j``, ``y = i``; fractional and off-grid values allowed, see
:mod:`mmpos.models.layers.rope`). :class:`RoPEPositions` maps them into the
frame the RoPE frequencies are meant for and, in training only, applies
DINOv3's random shift / jitter / rescale:

* ``frame='patch'``: unchanged (RoPE-ViT, today's default).
* ``frame='separate' | 'max' | 'min'``: patch *centres* normalised to
  ``[-1, 1]``: ``x' = 2 (x + 0.5) / d_x - 1``, ``y' = 2 (y + 0.5) / d_y - 1``
  with ``(d_x, d_y) = (W, H)``, ``(max(H, W),) * 2`` or ``(min(H, W),) * 2``
  for an ``H x W`` patch grid (DINOv3's ``normalize_coords``). The map is
  affine, so off-grid coordinates (crops, dropped patches) keep their
  meaning.
* Augmentation, drawn per sample from torch's global generator on the
  coordinates' device (so mmpos' ``RNGStateHook`` carries it across a
  resume) in DINOv3's order: shift ``s ~ U[-shift, shift]`` per axis (added),
  jitter ``exp(U[-log J, log J])`` per axis (multiplied), rescale
  ``exp(U[-log R, log R])`` shared by both axes (multiplied). Each draw is a
  ``(B, 2)`` (rescale ``(B, 1)``) tensor with the axes in DINOv3's
  ``(row, column)`` order, so a batch of one consumes the generator exactly
  as DINOv3 and timm's ``RotaryEmbeddingDinoV3`` do. In the patch frame the
  scaling is about the grid origin, in the normalised frames about the image
  centre.
"""
import math
from typing import Optional, Sequence

import torch
import torch.nn as nn
from torch import Tensor

from .rope import grid_coords

COORD_FRAMES = ('patch', 'separate', 'max', 'min')


def frame_coords(coords: Tensor, hw: Sequence[int], frame: str) -> Tensor:
    """Map patch-unit ``(x, y)`` coordinates ``(..., 2)`` into ``frame``
    for an ``hw = (H, W)`` patch grid (see the module docstring)."""
    if frame == 'patch':
        return coords
    h, w = (float(s) for s in hw)
    denom = {'separate': (w, h), 'max': (max(h, w), ) * 2,
             'min': (min(h, w), ) * 2}[frame]
    return (2 * coords + 1) / coords.new_tensor(denom) - 1


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


class RoPEPositions(nn.Module):
    """Coordinate frame and train-time augmentation of RoPE positions.

    Args:
        frame: one of :data:`COORD_FRAMES`.
        shift: DINOv3's ``shift_coords`` (``None``: off), in frame units.
        jitter: ``jitter_coords`` ``J >= 1`` (``None``: off).
        rescale: ``rescale_coords`` ``R >= 1`` (``None``: off; DINOv3's
            released models use 2).

    No parameters or buffers. :meth:`forward` returns ``None`` where the
    identity on the integer grid is meant (patch frame, no augmentation, no
    explicit coordinates), so RoPE keeps its cached tables.
    """

    def __init__(self,
                 frame: str = 'patch',
                 shift: Optional[float] = None,
                 jitter: Optional[float] = None,
                 rescale: Optional[float] = None):
        super().__init__()
        if frame not in COORD_FRAMES:
            raise ValueError(f'coordinate frame must be one of '
                             f'{COORD_FRAMES}, got {frame!r}')
        for name, value, low in (('shift', shift, 0.), ('jitter', jitter, 1.),
                                 ('rescale', rescale, 1.)):
            if value is not None and not (math.isfinite(value)
                                          and value >= low):
                raise ValueError(f'coordinate {name} must be a finite number'
                                 f' >= {low}, got {value!r}')
        self.frame = frame
        self.shift = shift
        self.jitter = jitter
        self.rescale = rescale

    @property
    def augments(self) -> bool:
        """Whether any augmentation is configured (used in training)."""
        return any(v is not None
                   for v in (self.shift, self.jitter, self.rescale))

    def extra_repr(self) -> str:
        return (f'frame={self.frame!r}, shift={self.shift}, '
                f'jitter={self.jitter}, rescale={self.rescale}')

    def augment(self, coords: Tensor, batch_size: int) -> Tensor:
        """Per-sample shift / jitter / rescale of ``(N, 2)`` or
        ``(B, N, 2)`` coordinates; returns ``(B, N, 2)``."""
        dd = dict(device=coords.device, dtype=torch.float32)
        out = coords.float().expand(batch_size, *coords.shape[-2:])
        if self.shift is not None:
            shift = torch.empty(batch_size, 2, **dd).uniform_(
                -self.shift, self.shift)
            out = out + shift.flip(-1)[:, None]
        if self.jitter is not None:
            log_j = math.log(self.jitter)
            jitter = torch.empty(batch_size, 2, **dd).uniform_(-log_j, log_j)
            out = out * jitter.exp().flip(-1)[:, None]
        if self.rescale is not None:
            log_r = math.log(self.rescale)
            rescale = torch.empty(batch_size, 1, **dd).uniform_(-log_r, log_r)
            out = out * rescale.exp()[:, None]
        return out

    def forward(self,
                coords: Optional[Tensor],
                hw: Optional[Sequence[int]],
                batch_size: int,
                device=None) -> Optional[Tensor]:
        """RoPE positions of the patch tokens.

        Args:
            coords: ``(M, 2)`` / ``(B, M, 2)`` patch-unit ``(x, y)``, or
                ``None`` for the full ``hw`` grid.
            hw: the ``(H, W)`` patch grid; required for the normalised
                frames (their denominators) and when ``coords`` is None.
            batch_size: ``B`` (augmentation draws one transform per sample).
            device: where to build the grid when ``coords`` is None.

        Returns:
            ``None`` (integer grid, let RoPE use its cache), the input
            ``coords`` (patch frame, no augmentation) or new ``(M, 2)`` /
            ``(B, M, 2)`` float coordinates.
        """
        augment = self.training and self.augments
        if self.frame == 'patch' and not augment:
            return coords
        if hw is None:
            raise ValueError(f'the {self.frame!r} coordinate frame needs the '
                             'patch grid hw')
        if coords is None:
            coords = grid_coords(*hw, device=device)
        coords = frame_coords(coords.float(), hw, self.frame)
        return self.augment(coords, batch_size) if augment else coords
