"""The position-scheme interface and the patch coordinates it reads.

A backbone calls its :class:`PositionScheme` once per forward for every
block's :class:`PositionTable` (as timm's Eva and DINOv3). Coordinates are
``(x, y)`` = (column, row) floats in patch units, ``(M, 2)`` or ``(B, M,
2)``; ``NaN`` = no position (DropPos' dropped patches, window padding).
Tables and rotations run outside autocast (:func:`full_precision`) in fp32
at least, as torchtitan keeps RoPE in fp32 (a bf16 angle at ``r = 63``
patches is off by up to 0.125 rad). Schemes keep no state between
forwards; caching and freezing are the wrappers of :mod:`.wrappers`.
"""
import contextlib
import math
from typing import List, Optional, Sequence, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from .window import padded_hw, window_partition

COORD_FRAMES = ('patch', 'separate', 'max', 'min')
DRAWS = ('per_forward', 'per_block')
DRAW_PER = ('sample', 'batch')


def check_choice(what: str, value, choices):
    """``value``, or one ``ValueError`` line unless it is in ``choices``."""
    if value not in choices:
        raise ValueError(f'{what} must be one of {tuple(choices)}, got '
                         f'{value!r}')
    return value


def options_repr(obj, names: Sequence[str]) -> str:
    """``name=value, ...`` of ``obj``'s attributes ``names`` (reprs)."""
    return ', '.join(f'{name}={getattr(obj, name)!r}' for name in names)


def full_precision(device_type: str):
    """A context turning autocast off on ``device_type`` where it is on (a
    no-op elsewhere, so exported graphs hold no autocast node)."""
    if torch.is_autocast_enabled(device_type):
        return torch.autocast(device_type, enabled=False)
    return contextlib.nullcontext()


def grid_coords(h: int, w: int, device=None,
                dtype: torch.dtype = torch.float32) -> Tensor:
    """``(x, y)`` of an ``h x w`` patch grid, ``(h * w, 2)``, row-major."""
    ys, xs = torch.meshgrid(torch.arange(h, device=device, dtype=dtype),
                            torch.arange(w, device=device, dtype=dtype),
                            indexing='ij')
    return torch.stack((xs.flatten(), ys.flatten()), dim=-1)


def geometric_magnitudes(dim: int, theta: float) -> Tensor:
    """``theta ** (-t / (dim/4))``, ``t < dim/4``, fp64 ``(dim/4,)``: RoPE's
    frequencies per axis (Heo et al. 2024, Eq. 13), the sin-cos
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
    ``sin(x w_t), cos(x w_t), sin(y w_t), cos(y w_t)`` with
    ``w_t`` = :func:`geometric_magnitudes` ``(C, temperature)``."""
    omega = geometric_magnitudes(embed_dims, temperature).to(
        coords.device, torch.float32)
    x = coords[..., 0:1].float() * omega  # (..., N, C/4)
    y = coords[..., 1:2].float() * omega
    return torch.stack((x.sin(), x.cos(), y.sin(), y.cos()),
                       dim=-1).flatten(-2)


def frame_coords(coords: Tensor, hw: Sequence[int], frame: str) -> Tensor:
    """``(..., 2)`` patch-unit coordinates of an ``hw = (H, W)`` grid in
    ``frame``: ``'patch'`` unchanged; else ``x' = 2 (x + 0.5) / d_x - 1``,
    ``(d_x, d_y) = (W, H)`` (``'separate'``) or ``max`` / ``min(H, W)``
    (DINOv3's ``normalize_coords``); symbolic sizes stay symbolic."""
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
    """Where the patches of crops came from ("view-consistent" RoPE of ICPF
    and CR2PQ): ``boxes`` ``(n, 4)`` = ``(x1, y1, x2, y2)`` normalised to
    the source (``x1 > x2``: flipped) of views on the ``hw = (h, w)`` grid
    -> ``(n, h * w, 2)``. Patch ``(i, j)``'s centre at source fraction ``u
    = x1 + (j + 0.5) / w (x2 - x1)`` (``v`` likewise) is at ``(u W - 0.5,
    v H - 0.5)`` in patches of ``unit_hw = (H, W)`` (default ``hw``; views
    given one ``unit_hw`` share one frame, as CR2PQ's two views)."""
    h, w = hw
    unit_h, unit_w = unit_hw or hw
    grid = grid_coords(h, w, device=boxes.device)  # (N, 2)
    frac = (grid + 0.5) / grid.new_tensor((w, h))
    start, size = boxes[:, None, :2], boxes[:, None, 2:] - boxes[:, None, :2]
    return (start + frac * size) * grid.new_tensor((unit_w, unit_h)) - 0.5


class PatchCoords(nn.Module):
    """The coordinate ``frame`` (:func:`frame_coords`) and DINOv3's
    train-time augmentation (Simeoni et al. 2025; torch's generator, its
    order, axes ``(row, column)``): add ``U[-shift, shift]`` per axis,
    multiply by ``exp(U[-log J, log J])`` per axis (``jitter`` ``J``) and
    both by one ``exp(U[-log R, log R])`` (``rescale`` ``R``); ``None``:
    off. ``draw``: one draw ``'per_forward'`` (timm) or ``'per_block'``
    (DINOv3); ``per``: ``'sample'`` or ``'batch'`` (DINOv3, timm)."""

    def __init__(self, frame: str = 'patch', shift: Optional[float] = None,
                 jitter: Optional[float] = None,
                 rescale: Optional[float] = None,
                 draw: str = 'per_forward', per: str = 'sample'):
        super().__init__()
        self.frame = check_choice('coords frame', frame, COORD_FRAMES)
        self.draw = check_choice('coords draw', draw, DRAWS)
        self.per = check_choice('coords per', per, DRAW_PER)
        for name, value, low in (('shift', shift, 0.), ('jitter', jitter, 1.),
                                 ('rescale', rescale, 1.)):
            if value is not None and not (math.isfinite(value)
                                          and value >= low):
                raise ValueError(f'coordinate {name} must be a finite number'
                                 f' >= {low}, got {value!r}')
        self.shift, self.jitter, self.rescale = shift, jitter, rescale

    @property
    def augments(self) -> bool:
        """Whether this forward moves the coordinates randomly."""
        return self.training and any(
            v is not None for v in (self.shift, self.jitter, self.rescale))

    def extra_repr(self) -> str:
        return options_repr(self, ('frame', 'shift', 'jitter', 'rescale',
                                   'draw', 'per'))

    def augment(self, coords: Tensor, batch_size: int) -> Tensor:
        """One draw: ``(1|B, M, 2)`` -> ``(B, M, 2)`` (``per='sample'``) or
        ``(1|B, M, 2)`` (``'batch'``)."""
        n = batch_size if self.per == 'sample' else 1
        out = coords.float().expand(max(n, coords.shape[0]), -1, -1)
        for value, axes, log in ((self.shift, 2, False),
                                 (self.jitter, 2, True),
                                 (self.rescale, 1, True)):
            if value is not None:  # (n, axes) as (row, col) -> (x, y)
                bound = math.log(value) if log else value
                u = torch.empty(n, axes, device=coords.device,
                                dtype=torch.float32).uniform_(
                                    -bound, bound).flip(-1)[:, None]
                out = out * u.exp() if log else out + u
        return out.to(coords.dtype)

    def forward(self, coords: Tensor, hw: Optional[Sequence[int]],
                batch_size: int, depth: int) -> Union[Tensor, List[Tensor]]:
        """``(1|B, M, 2)`` patch-unit coordinates of an ``hw`` grid in the
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
    """``x`` ``(..., n', heads, M, D)`` as ``(..., n' / n, n, heads, M, D)``
    where a table of ``n`` windows serves ``n' = B n`` (batch-major)."""
    if n in (1, x.shape[-4]):
        return x
    return x.unflatten(-4, (-1, n))


def tile_windows(t: Tensor, batch: int) -> Tensor:
    """``t`` ``(n, ...)`` for ``batch`` token sets: itself for ``n`` in
    ``(1, batch)``, else repeated (the ``n`` windows of one image for
    ``batch = B n`` windows, batch-major as
    :func:`~.window.window_partition` orders them)."""
    n = t.shape[0]
    if n in (1, batch):
        return t
    if batch % n:
        raise ValueError(f'a table of {n} position sets cannot serve '
                         f'{batch} token sets')
    return t.repeat(batch // n, *([1] * (t.dim() - 1)))


class PositionTable:
    """One block's positions of the last ``M`` tokens, applied by attention:
    :meth:`rotate` on queries and keys and the additive :attr:`attn_bias`.
    The leading dimension ``n`` of its tensors is 1 (shared), ``B`` (per
    sample) or the ``nW`` windows of one image (:func:`per_window`).
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
        outside autocast in the table's dtype, returned in ``x.dtype``."""
        with full_precision(x.device.type):
            return self.rotate_tokens(x)

    def rotate_tokens(self, x: Tensor) -> Tensor:
        """``x`` ``(..., n', heads, N, D)``: the last ``M`` tokens by
        :meth:`rotate_patches`, the prefix unchanged. Subclasses override
        this or :meth:`rotate_patches`, never :meth:`rotate`."""
        if not self.num_prefix(x):
            return self.rotate_patches(x)
        m = self.num_tokens
        return torch.cat((x[..., :-m, :], self.rotate_patches(x[..., -m:, :])),
                         dim=-2)

    def export(self) -> 'PositionTable':
        """The same table with real tensors only (ONNX); ``self`` here."""
        return self

    def logit_bias(self, num_tokens: int, batch: int) -> Optional[Tensor]:
        """:attr:`attn_bias` over all ``N = num_tokens`` tokens of ``batch``
        token sets, ``(1 | batch, heads | 1, N, N)`` (0 on the prefix's rows
        and columns; :func:`tile_windows`), added to the attention's
        logits; ``None`` without bias."""
        if self.attn_bias is None:
            return None
        pad = (num_tokens - self.num_tokens, 0) * 2
        return tile_windows(F.pad(self.attn_bias, pad), batch)


class BiasTable(PositionTable):
    """A bias-only table (LookHere, a bound PaPE table): ``attn_bias``
    ``(n, heads, M, M)``; rotates nothing (returns ``x`` itself after
    :meth:`num_prefix`'s check)."""

    def __init__(self, attn_bias: Tensor):
        self.attn_bias = attn_bias
        self.num_tokens = attn_bias.shape[-1]

    def rotate_tokens(self, x: Tensor) -> Tensor:
        self.num_prefix(x)
        return x


class PositionScheme(nn.Module):
    """Base class of the schemes: owns the parameters of all ``depth``
    blocks of ``num_heads`` heads of ``head_dim`` channels and returns one
    :class:`PositionTable` per block; ``coords``: :class:`PatchCoords`
    options. Subclasses implement :meth:`block_table`; :attr:`shared`:
    equal coordinates give every block the same table (computed once);
    :attr:`OPTIONS`: the attributes its repr shows.
    """
    shared = False
    OPTIONS = ()

    def __init__(self, head_dim: int, num_heads: int, depth: int,
                 coords: Optional[dict] = None):
        super().__init__()
        self.head_dim, self.num_heads, self.depth = head_dim, num_heads, depth
        self.coords = PatchCoords(**(coords or {}))

    def extra_repr(self) -> str:
        return options_repr(self, self.OPTIONS)

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
        """Every block's table of ``coords`` ``(M, 2)`` / ``(B, M, 2)``
        (``None``: the ``hw = (H, W)`` grid) for ``batch_size`` images, on
        ``device`` in ``dtype`` (:func:`table_device_dtype`). ``windows``:
        per block, the side ``ws`` of its attention windows (0, the
        default: global); its table positions the ``ws * ws`` tokens of the
        windows of the padded grid (:func:`~.window.window_partition`), the
        padding continuing the grid for the unaugmented grid in the patch
        frame, else without position (``NaN``)."""
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
                elif grid and self.coords.frame == 'patch' and \
                        not self.coords.augments:  # (nW, ws * ws, 2)
                    padded = padded_hw(hw, ws)
                    block_coords = window_partition(grid_coords(
                        *padded, device=device, dtype=dtype)[None], padded, ws)
                elif isinstance(drawn, Tensor):  # (n nW, ws * ws, 2)
                    block_coords = window_partition(drawn, hw, ws, math.nan)
                else:
                    block_coords = {i: window_partition(drawn[i], hw, ws,
                                                        math.nan)
                                    for i in blocks}
                for i, table in zip(blocks, self.tables(block_coords, hw,
                                                        blocks)):
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
