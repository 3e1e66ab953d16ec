"""Position schemes: one module per backbone computes every block's position
table once per forward (as timm's Eva and DINOv3 do) and each block applies
its own table (``layer(x, rope=tables[i], hw=hw)``).

* :class:`PatchCoords`: the coordinate frame and the train-time coordinate
  augmentation (shift / jitter / rescale of DINOv3, Simeoni et al. 2025) of
  the patch positions, drawn per forward or per block, per sample or per
  batch.
* :class:`PositionScheme`: base class of the schemes registered in
  :data:`mmpos.registry.POSITION_ENCODINGS` under a short ``type`` name
  (``'axial'``, ``'mixed'``, ``'dinov3'``, ...) and built by
  :func:`build_position_scheme` as ``cls(head_dim=, num_heads=, depth=,
  **cfg)``. It owns its parameters for all blocks (e.g. RoPE-Mixed's
  learnable frequencies) and returns one :class:`PositionTable` per block.
* :class:`PositionTable`: what a block's attention applies:
  :meth:`PositionTable.rotate` on the queries and keys and the additive
  :attr:`PositionTable.attn_bias`.

Coordinates are ``(x, y)`` in patch units (``x`` = column, ``y`` = row;
:func:`~mmpos.models.layers.rope.grid_coords`); a ``NaN`` coordinate marks a
token without position (DropPos' dropped positions, window padding), which a
scheme must leave unrotated.
"""
import math
from typing import List, Optional, Sequence

import torch
import torch.nn as nn
from torch import Tensor

from mmpos.registry import POSITION_ENCODINGS
from .rope_functional import grid_coords

COORD_FRAMES = ('patch', 'separate', 'max', 'min')
DRAWS = ('per_forward', 'per_block')
DRAW_PER = ('sample', 'batch')


def frame_coords(coords: Tensor, hw: Sequence[int], frame: str) -> Tensor:
    """Map patch-unit ``(x, y)`` coordinates ``(..., 2)`` into ``frame``
    for an ``hw = (H, W)`` patch grid.

    ``'patch'``: unchanged (RoPE-ViT). ``'separate' | 'max' | 'min'``: patch
    centres normalised to ``[-1, 1]``, ``x' = 2 (x + 0.5) / d_x - 1`` with
    ``(d_x, d_y) = (W, H)``, ``(max(H, W),) * 2`` or ``(min(H, W),) * 2``
    (DINOv3's ``normalize_coords``); affine, so off-grid coordinates keep
    their meaning.
    """
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


class PatchCoords(nn.Module):
    """Coordinate frame and train-time augmentation of the patch positions.

    Args:
        frame: one of :data:`COORD_FRAMES` (:func:`frame_coords`).
        shift: DINOv3's ``shift_coords`` ``s``: add ``U[-s, s]`` per axis
            (frame units; ``None``: off).
        jitter: ``jitter_coords`` ``J >= 1``: multiply by
            ``exp(U[-log J, log J])`` per axis (``None``: off).
        rescale: ``rescale_coords`` ``R >= 1``: multiply both axes by one
            ``exp(U[-log R, log R])`` (``None``: off; DINOv3's released
            models use 2).
        draw: ``'per_forward'``: one draw per forward shared by all blocks
            (timm's ``RotaryEmbeddingDinoV3``); ``'per_block'``: a fresh draw
            for every block (DINOv3's ``DinoVisionTransformer``, which calls
            ``rope_embed(H, W)`` inside its block loop).
        per: ``'sample'``: an own transform per image; ``'batch'``: one
            transform for the whole batch (DINOv3's and timm's code).

    Draws come from torch's global generator on the coordinates' device, in
    DINOv3's order (shift ``(n, 2)``, jitter ``(n, 2)``, rescale ``(n, 1)``,
    axes ``(row, column)``; ``n`` = batch size or 1), so ``per='batch'``
    consumes the generator as DINOv3's code does. In the patch frame scaling
    is about the grid origin, in the normalised frames about the centre.
    No parameters; augmentation in training mode only.
    """

    def __init__(self, frame: str = 'patch', shift: Optional[float] = None,
                 jitter: Optional[float] = None,
                 rescale: Optional[float] = None,
                 draw: str = 'per_forward', per: str = 'sample'):
        super().__init__()
        for name, value, choices in (('frame', frame, COORD_FRAMES),
                                     ('draw', draw, DRAWS),
                                     ('per', per, DRAW_PER)):
            if value not in choices:
                raise ValueError(f'coords {name} must be one of {choices}, '
                                 f'got {value!r}')
        for name, value, low in (('shift', shift, 0.), ('jitter', jitter, 1.),
                                 ('rescale', rescale, 1.)):
            if value is not None and not (math.isfinite(value)
                                          and value >= low):
                raise ValueError(f'coordinate {name} must be a finite number'
                                 f' >= {low}, got {value!r}')
        self.frame, self.draw, self.per = frame, draw, per
        self.shift, self.jitter, self.rescale = shift, jitter, rescale

    @property
    def augments(self) -> bool:
        """Whether this forward moves the coordinates randomly."""
        return self.training and any(
            v is not None for v in (self.shift, self.jitter, self.rescale))

    @property
    def is_identity(self) -> bool:
        """Patch frame and no augmentation in this mode."""
        return self.frame == 'patch' and not self.augments

    def extra_repr(self) -> str:
        return (f'frame={self.frame!r}, shift={self.shift}, jitter='
                f'{self.jitter}, rescale={self.rescale}, draw={self.draw!r}, '
                f'per={self.per!r}')

    def augment(self, coords: Tensor, batch_size: int) -> Tensor:
        """One shift / jitter / rescale draw of ``(1|B, M, 2)`` coordinates;
        ``(B, M, 2)`` (``per='sample'``) or ``(1|B, M, 2)`` (``'batch'``)."""
        n = batch_size if self.per == 'sample' else 1
        dd = dict(device=coords.device, dtype=torch.float32)
        out = coords.float().expand(max(n, coords.shape[0]), -1, -1)
        if self.shift is not None:  # (n, 2) as (row, col) -> (x, y)
            shift = torch.empty(n, 2, **dd).uniform_(-self.shift, self.shift)
            out = out + shift.flip(-1)[:, None]
        if self.jitter is not None:
            log_j = math.log(self.jitter)
            jitter = torch.empty(n, 2, **dd).uniform_(-log_j, log_j)
            out = out * jitter.exp().flip(-1)[:, None]
        if self.rescale is not None:
            log_r = math.log(self.rescale)
            rescale = torch.empty(n, 1, **dd).uniform_(-log_r, log_r)
            out = out * rescale.exp()[:, None]
        return out.to(coords.dtype)

    def forward(self, coords: Tensor, hw: Sequence[int], batch_size: int,
                depth: int) -> List[Tensor]:
        """``depth`` per-block coordinates ``(1|B, M, 2)`` from patch-unit
        ``coords`` ``(1|B, M, 2)`` of an ``hw`` grid: mapped to the frame,
        augmented in training (the same tensor for every block unless
        ``draw='per_block'``)."""
        if self.frame != 'patch' and hw is None:
            raise ValueError(f'the {self.frame!r} coordinate frame needs the '
                             'patch grid hw')
        coords = frame_coords(coords, hw, self.frame)
        if not self.augments:
            return [coords] * depth
        if self.draw == 'per_block':
            return [self.augment(coords, batch_size) for _ in range(depth)]
        return [self.augment(coords, batch_size)] * depth


class PositionTable:
    """One block's positions of ``M`` patch tokens, applied by attention.

    Subclasses implement :meth:`rotate_patches` (the identity here) and/or
    set :attr:`attn_bias`. Tables carry a leading batch dimension ``n`` of
    1 (shared), ``B'`` (per sample / window) or, for windows, the ``nW``
    windows of one image, applied to every image of a ``B * nW`` batch.
    """
    #: additive logit bias ``(n, heads | 1, M, M)`` over the patch tokens,
    #: or ``None``
    attn_bias: Optional[Tensor] = None
    #: ``M``, the patch tokens this table positions
    num_tokens: int

    def rotate_patches(self, x: Tensor) -> Tensor:
        """``x`` ``(..., n', heads, M, D)`` -> same shape; ``n'`` a
        multiple of the table's ``n``."""
        return x

    def rotate(self, x: Tensor) -> Tensor:
        """Rotate queries/keys ``x`` ``(..., B', heads, N, D)``: the last
        ``M`` tokens by this table, the ``N - M`` leading prefix tokens
        (class, registers) unchanged."""
        m = self.num_tokens
        if x.shape[-2] < m:
            raise ValueError(f'{m} positions given for only {x.shape[-2]} '
                             'tokens')
        if x.shape[-2] == m:
            return self.rotate_patches(x)
        return torch.cat((x[..., :-m, :], self.rotate_patches(x[..., -m:, :])),
                         dim=-2)

    def export(self) -> 'PositionTable':
        """A table for tracing (ONNX: real tensors only); ``self`` here."""
        return self


def per_window(x: Tensor, n: int) -> Tensor:
    """``x`` ``(..., n', heads, M, D)`` viewed ``(..., n' / n, n, heads,
    M, D)`` when a table of ``n`` windows serves ``n' = B * n`` windows
    (batch-major, as :func:`~.window.window_partition` orders them);
    ``x`` itself when ``n`` is 1 or ``n'``."""
    if n in (1, x.shape[-4]):
        return x
    return x.unflatten(-4, (-1, n))


class PositionScheme(nn.Module):
    """Base class of the position schemes (module docstring).

    Args:
        head_dim: channels per head ``D``.
        num_heads: heads.
        depth: blocks; :meth:`forward` returns ``depth`` tables.
        coords: :class:`PatchCoords` options (frame, augmentation, draw).

    Subclasses implement :meth:`block_table`; :attr:`shared` says whether
    all blocks' tables are equal for equal coordinates (then one table is
    computed per distinct coordinate tensor).
    """
    shared = False

    def __init__(self, head_dim: int, num_heads: int, depth: int,
                 coords: Optional[dict] = None):
        super().__init__()
        self.head_dim, self.num_heads, self.depth = head_dim, num_heads, depth
        self.coords = PatchCoords(**(coords or {}))

    def block_table(self, index: int, coords: Tensor) -> PositionTable:
        """Block ``index``'s table for coordinates ``(n, M, 2)`` in the
        scheme's frame (``NaN``: no position)."""
        raise NotImplementedError

    def tables(self, coords: Sequence[Optional[Tensor]],
               hw: Optional[Sequence[int]] = None
               ) -> List[Optional[PositionTable]]:
        """Per-block tables for per-block coordinates (``None``: no table
        for that block) on the patch grid ``hw`` (the whole grid, also for
        window tables; schemes that rescale for larger grids read it)."""
        out, done = [], {}
        for i, c in enumerate(coords):
            if c is None:
                out.append(None)
            elif self.shared and id(c) in done:
                out.append(done[id(c)])
            else:
                out.append(self.block_table(i, c))
                done[id(c)] = out[-1]
        return out

    def forward(self, coords: Tensor, hw: Sequence[int],
                batch_size: int) -> List[PositionTable]:
        """``depth`` tables for patch-unit ``coords`` ``(1|B, M, 2)`` of an
        ``hw`` grid (frame and augmentation of :attr:`coords` applied)."""
        return self.tables(self.coords(coords, hw, batch_size, self.depth),
                           hw)


def build_position_scheme(cfg: Optional[dict], head_dim: int,
                          num_heads: int, depth: int
                          ) -> Optional[PositionScheme]:
    """``POSITION_ENCODINGS`` scheme of ``cfg = dict(type=..., ...)`` for
    ``depth`` blocks of ``num_heads`` heads of ``head_dim`` channels;
    ``None`` for ``cfg=None``."""
    if cfg is None:
        return None
    cfg = dict(cfg)
    # looked up directly: POSITION_ENCODINGS is mmpos' own registry, so
    # Registry.build would first search the caller's default scope
    # (mmpretrain, mmdet, mmseg) and warn that it is not in the tree
    name = cfg.pop('type', None)
    cls = POSITION_ENCODINGS.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f'rope type {name!r} is not a position scheme; '
                         f'choose from {sorted(POSITION_ENCODINGS.module_dict)}'
                         ' or rope=None')
    return cls(head_dim=head_dim, num_heads=num_heads, depth=depth, **cfg)
