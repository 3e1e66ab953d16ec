"""The position-scheme interface and the patch coordinates it reads.

A backbone owns one :class:`PositionScheme` (``rope=dict(type=...)``,
:data:`~mmpos_positions.SCHEMES`) and asks it once per forward for
every block's :class:`PositionTable`: ``tables = self.rope(coords, hw,
batch_size, windows)``; block ``i`` then runs ``layer(x, rope=tables[i])``
(as timm's Eva and DINOv3 compute their RoPE once per forward).

Coordinates are ``(x, y)`` floats in patch units (``x`` = column, ``y`` =
row), ``(M, 2)`` shared by the batch or ``(B, M, 2)`` per sample;
:func:`grid_coords` is the integer grid in ``PatchEmbed``'s row-major token
order. ``NaN`` marks a token without position (DropPos' dropped positions,
window padding): every scheme leaves it where it is (angle 0, identity, no
bias). Before a scheme sees them, :class:`PatchCoords` maps them into its
frame and, in training, augments them (DINOv3's shift / jitter / rescale).

Precision (:func:`full_precision`, the one place of the policy): tables
are computed and queries / keys rotated outside autocast, in fp32 at least
(fp64 for fp64 coordinates); the rotated tokens return in the input dtype.
Under bf16 / fp16 autocast (CPU or CUDA) only the attention's matmuls run in
low precision, as torchtitan keeps RoPE in fp32: an angle ``a_t = f_t . r``
at ``r = 63`` patches rounded to bf16 is off by up to 0.125 rad.

A scheme keeps no state between forwards: caching the eval tables of a
grid and freezing them for export are opt-in wrappers (:mod:`.wrappers`).
"""
import contextlib
import math
from typing import List, Optional, Sequence, Union

import torch
import torch.nn as nn
from torch import Tensor

from .window import padded_hw, window_partition

COORD_FRAMES = ('patch', 'separate', 'max', 'min')
DRAWS = ('per_forward', 'per_block')
DRAW_PER = ('sample', 'batch')


def full_precision(device_type: str):
    """The positions' precision policy: a context that turns autocast off on
    ``device_type`` (``'cpu'``, ``'cuda'``) where it is on, so that tables
    and rotations run in their own dtype (fp32 at least, see
    :meth:`PositionScheme.forward`); a no-op context otherwise (also in
    exported graphs: no autocast node)."""
    if torch.is_autocast_enabled(device_type):
        return torch.autocast(device_type, enabled=False)
    return contextlib.nullcontext()


def grid_coords(h: int, w: int, device=None,
                dtype: torch.dtype = torch.float32) -> Tensor:
    """Integer ``(x, y)`` coordinates of an ``h x w`` patch grid, ``(h * w,
    2)``, row-major (``y`` outer, ``x`` inner) as ``PatchEmbed``'s tokens."""
    ys, xs = torch.meshgrid(torch.arange(h, device=device, dtype=dtype),
                            torch.arange(w, device=device, dtype=dtype),
                            indexing='ij')
    return torch.stack((xs.flatten(), ys.flatten()), dim=-1)


def geometric_magnitudes(dim: int, theta: float) -> Tensor:
    """``theta ** (-t / (dim / 4))`` for ``t < dim / 4``, fp64 ``(dim/4,)``:
    RoPE's frequencies per axis (Heo et al. 2024, Eq. 13) and the sin-cos
    embedding's (Eq. 2)."""
    if dim % 4:
        raise ValueError('2-D position encodings need a dimension divisible '
                         f'by 4, got {dim}')
    quarter = dim // 4
    return theta**(-torch.arange(quarter, dtype=torch.float64) / quarter)


def sincos_pos_embed_2d(coords: Tensor, embed_dims: int,
                        temperature: float = 10000.) -> Tensor:
    """Fixed 2-D sin-cos absolute embedding (Heo et al. 2024, Eq. 2):
    ``(..., N, 2)`` -> ``(..., N, C)`` fp32, channels ``4t .. 4t + 3`` =
    ``sin(x w_t), cos(x w_t), sin(y w_t), cos(y w_t)``, ``w_t`` of
    :func:`geometric_magnitudes` with ``theta = temperature``."""
    omega = geometric_magnitudes(embed_dims, temperature).to(
        coords.device, torch.float32)
    x = coords[..., 0:1].float() * omega  # (..., N, C/4)
    y = coords[..., 1:2].float() * omega
    return torch.stack((x.sin(), x.cos(), y.sin(), y.cos()),
                       dim=-1).flatten(-2)


def frame_coords(coords: Tensor, hw: Sequence[int], frame: str) -> Tensor:
    """Patch-unit ``(..., 2)`` coordinates of an ``hw = (H, W)`` grid in
    ``frame``: ``'patch'`` unchanged (RoPE-ViT); ``'separate' | 'max' |
    'min'``: ``x' = 2 (x + 0.5) / d_x - 1`` with ``(d_x, d_y) = (W, H)``,
    ``max(H, W)`` or ``min(H, W)`` for both (DINOv3's ``normalize_coords``;
    patch centres in ``[-1, 1]``). Affine, so off-grid coordinates keep
    their meaning. Symbolic sizes stay symbolic (``torch.sym_max``,
    division by the sizes, no tensor built from them), so a
    dynamic-resolution export computes the frame from its input's grid."""
    if frame == 'patch':
        return coords
    h, w = hw
    if frame == 'separate':
        dx, dy = w, h
    else:
        dx = dy = (torch.sym_max if frame == 'max' else torch.sym_min)(h, w)
    scaled = 2 * coords + 1
    return torch.stack((scaled[..., 0] / dx, scaled[..., 1] / dy), -1) - 1


def box_coords(boxes: Tensor, hw: Sequence[int],
               unit_hw: Optional[Sequence[int]] = None) -> Tensor:
    """Where a view's patches came from in the source image
    ("view-consistent" RoPE of ICPF and CR2PQ).

    Args:
        boxes: ``(n, 4)`` crop boxes ``(x1, y1, x2, y2)`` normalised to the
            source image (``x1 > x2``: a horizontally flipped view, as
            ``MultiViewWithBoxes`` records).
        hw: the views' patch grid ``(h, w)``.
        unit_hw: the grid ``(H, W)`` whose patches are the unit (default
            ``hw``): views given one ``unit_hw`` share one coordinate system
            (CR2PQ's queries of view B among view A's keys).

    Returns:
        ``(n, h * w, 2)``: patch ``(i, j)``'s centre at source fraction
        ``u = x1 + (j + 0.5) / w (x2 - x1)`` (``v`` likewise) as ``x = u W -
        0.5``, ``y = v H - 0.5``. In the ``'separate'`` frame these are
        ``2 u - 1``, ``2 v - 1`` for any crop and resolution.
    """
    h, w = hw
    unit_h, unit_w = unit_hw or hw
    grid = grid_coords(h, w, device=boxes.device)  # (N, 2)
    frac = (grid + 0.5) / grid.new_tensor((w, h))
    start, size = boxes[:, None, :2], boxes[:, None, 2:] - boxes[:, None, :2]
    return (start + frac * size) * grid.new_tensor((unit_w, unit_h)) - 0.5


class PatchCoords(nn.Module):
    """Coordinate frame and train-time augmentation of the patch positions
    (DINOv3, Simeoni et al. 2025). No parameters.

    Args:
        frame: one of :data:`COORD_FRAMES` (:func:`frame_coords`).
        shift: ``s``: add ``U[-s, s]`` per axis (frame units; ``None``: off).
        jitter: ``J >= 1``: multiply by ``exp(U[-log J, log J])`` per axis.
        rescale: ``R >= 1``: multiply both axes by one ``exp(U[-log R,
            log R])`` (DINOv3's released models: 2).
        draw: ``'per_forward'``: one draw shared by all blocks (timm);
            ``'per_block'``: a draw per block (DINOv3's own code).
        per: ``'sample'``: a transform per image; ``'batch'``: one for the
            batch (DINOv3's and timm's code).

    Draws come from torch's global generator on the coordinates' device in
    DINOv3's order (shift ``(n, 2)``, jitter ``(n, 2)``, rescale ``(n, 1)``,
    axes ``(row, column)``), in training mode only. Scaling is about the
    grid origin in the patch frame, about the centre in the others.
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
        """One draw: ``(1|B, M, 2)`` -> ``(B, M, 2)`` (``per='sample'``) or
        ``(1|B, M, 2)`` (``'batch'``)."""
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

    def forward(self, coords: Tensor, hw: Optional[Sequence[int]],
                batch_size: int, depth: int) -> Union[Tensor, List[Tensor]]:
        """Patch-unit ``(1|B, M, 2)`` coordinates of an ``hw`` grid in the
        frame, augmented in training: one ``(1|B, M, 2)`` tensor for all
        blocks, or ``depth`` of them (``draw='per_block'``)."""
        if self.frame != 'patch' and hw is None:
            raise ValueError(f'the {self.frame!r} coordinate frame needs the '
                             'patch grid hw')
        coords = frame_coords(coords, hw, self.frame)
        if not self.augments:
            return coords
        if self.draw == 'per_block':
            return [self.augment(coords, batch_size) for _ in range(depth)]
        return self.augment(coords, batch_size)


def per_window(x: Tensor, n: int) -> Tensor:
    """``x`` ``(..., n', heads, M, D)`` viewed ``(..., n' / n, n, heads, M,
    D)`` when a table of ``n`` windows serves ``n' = B n`` windows
    (batch-major, as :func:`~.window.window_partition` orders them); ``x``
    itself when ``n`` is 1 or ``n'``."""
    if n in (1, x.shape[-4]):
        return x
    return x.unflatten(-4, (-1, n))


class PositionTable:
    """One block's positions of the last ``M`` tokens, applied by attention:
    :meth:`rotate` on queries and keys and the additive :attr:`attn_bias`.

    The leading dimension ``n`` of a table's tensors is 1 (shared), ``B``
    (per sample) or, for windows, the ``nW`` windows of one image (applied
    to every image of a ``B nW`` batch, :func:`per_window`).
    """
    #: ``(n, heads | 1, M, M)`` logit bias over the positioned tokens
    attn_bias: Optional[Tensor] = None
    #: ``M``, the tokens this table positions (the last ones)
    num_tokens: int

    def rotate_patches(self, x: Tensor) -> Tensor:
        """``(..., n', heads, M, D)`` -> same; identity here."""
        return x

    def num_prefix(self, x: Tensor) -> int:
        """``N - M``: the leading tokens of ``x`` ``(..., N, D)`` (class,
        registers) that the table leaves unchanged."""
        if x.shape[-2] < self.num_tokens:
            raise ValueError(f'{self.num_tokens} positions given for only '
                             f'{x.shape[-2]} tokens')
        return x.shape[-2] - self.num_tokens

    def rotate(self, x: Tensor) -> Tensor:
        """``x`` ``(..., n', heads, N, D)`` rotated by :meth:`rotate_tokens`
        outside autocast (:func:`full_precision`), in the table's dtype,
        returned in ``x.dtype``."""
        with full_precision(x.device.type):
            return self.rotate_tokens(x)

    def rotate_tokens(self, x: Tensor) -> Tensor:
        """``x`` ``(..., n', heads, N, D)``: the last ``M`` tokens by
        :meth:`rotate_patches`, the prefix tokens unchanged. Subclasses
        override this or :meth:`rotate_patches`, never :meth:`rotate`."""
        if not self.num_prefix(x):
            return self.rotate_patches(x)
        m = self.num_tokens
        return torch.cat((x[..., :-m, :], self.rotate_patches(x[..., -m:, :])),
                         dim=-2)

    def export(self) -> 'PositionTable':
        """The same table with real tensors only (ONNX); ``self`` here."""
        return self


class PositionScheme(nn.Module):
    """Base class of the schemes: owns the parameters of all ``depth``
    blocks and returns one :class:`PositionTable` per block.

    Args:
        head_dim: channels per head ``D``.
        num_heads: heads.
        depth: blocks.
        coords: :class:`PatchCoords` options (frame, augmentation, draw).

    Subclasses implement :meth:`block_table`. :attr:`shared`: equal
    coordinates give every block the same table (then it is computed once).
    """
    shared = False

    def __init__(self, head_dim: int, num_heads: int, depth: int,
                 coords: Optional[dict] = None):
        super().__init__()
        self.head_dim, self.num_heads, self.depth = head_dim, num_heads, depth
        self.coords = PatchCoords(**(coords or {}))

    def block_table(self, index: int, coords: Tensor,
                    hw: Optional[Sequence[int]] = None) -> PositionTable:
        """Block ``index``'s table of ``(n, M, 2)`` coordinates in the
        scheme's frame (``NaN``: no position) on the patch grid ``hw``."""
        raise NotImplementedError

    def tables(self, coords: Union[Tensor, Sequence[Tensor]],
               hw: Optional[Sequence[int]] = None,
               blocks: Optional[Sequence[int]] = None) -> List[PositionTable]:
        """The tables of ``blocks`` (default: all) for coordinates in the
        frame: one ``(n, M, 2)`` tensor for every block, or one per block."""
        blocks = list(range(self.depth)) if blocks is None else blocks
        if not isinstance(coords, Tensor):
            return [self.block_table(i, coords[i], hw) for i in blocks]
        if self.shared:
            return [self.block_table(blocks[0], coords, hw)] * len(blocks)
        return [self.block_table(i, coords, hw) for i in blocks]

    def forward(self, coords: Optional[Tensor], hw: Optional[Sequence[int]],
                batch_size: int = 1, windows: Sequence[int] = (),
                device=None, dtype: Optional[torch.dtype] = None
                ) -> List[PositionTable]:
        """Every block's table, computed (eager, compiled and exported
        alike).

        Args:
            coords: ``(M, 2)`` / ``(B, M, 2)`` patch-unit coordinates, or
                ``None``: the whole ``hw`` grid.
            hw: the patch grid ``(H, W)``.
            batch_size: ``B`` (per-sample augmentation).
            windows: per block, the side ``ws`` of its attention windows
                (``0``: global; default all global). A windowed block's
                table positions its ``(ws * ws)``-token windows of the
                padded grid (:func:`~.window.window_partition`); the
                padding continues the integer grid when the coordinates are
                the grid in the patch frame, unaugmented, else it has no
                position (``NaN``).
            device, dtype: of the coordinates and tables (default: those
                of ``coords``; fp32 for the grid); fp32 at least, computed
                outside autocast (:func:`full_precision`).
        """
        device, dtype = table_device_dtype(coords, device, dtype)
        windows = list(windows) or [0] * self.depth
        if any(windows) and hw is None:
            raise ValueError('window attention needs the patch grid `hw`')
        grid = coords is None
        with full_precision(device.type):
            if grid:
                coords = grid_coords(*hw, device=device, dtype=dtype)
            coords = coords.to(device, dtype)
            coords = coords if coords.dim() == 3 else coords[None]  # (1|B,M,2)
            drawn = self.coords(coords, hw, batch_size, self.depth)
            out = [None] * self.depth
            for ws in sorted(set(windows)):
                blocks = [i for i, w in enumerate(windows) if w == ws]
                if not ws:
                    block_coords = drawn
                elif grid and self.coords.is_identity:
                    padded = padded_hw(hw, ws)  # (nW, ws * ws, 2)
                    block_coords = window_partition(grid_coords(
                        *padded, device=device, dtype=dtype)[None], padded, ws)
                elif isinstance(drawn, Tensor):  # (n nW, ws * ws, 2)
                    block_coords = window_partition(drawn, hw, ws, math.nan)
                else:
                    block_coords = {i: window_partition(drawn[i], hw, ws,
                                                        math.nan)
                                    for i in blocks}
                tables = self.tables(block_coords, hw, blocks)
                for i, table in zip(blocks, tables):
                    out[i] = table
        return out


def table_device_dtype(coords: Optional[Tensor], device=None,
                       dtype: Optional[torch.dtype] = None) -> tuple:
    """``(device, dtype)`` of :meth:`PositionScheme.forward`'s tables: the
    given ones, else those of ``coords`` (CPU fp32 for the grid), the dtype
    fp32 at least."""
    dtype = torch.promote_types(
        dtype or (torch.float32 if coords is None else coords.dtype),
        torch.float32)
    device = torch.device(device if device is not None else
                          'cpu' if coords is None else coords.device)
    return device, dtype
