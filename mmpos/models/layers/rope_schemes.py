"""Position schemes beyond RoPE-Axial / RoPE-Mixed: the maths.

Every scheme here turns the positions ``(B | 1, M, 2)`` of ``M`` patch tokens
(``(x, y)`` in the scheme's coordinate frame, see
:class:`~.position.PatchCoords`) into what the attention applies
to the queries / keys ``(B, heads, M, D)`` of those tokens: an orthogonal
map per token (rotary schemes) or an additive logit bias (LookHere).

Rotary schemes share the form ``q_i -> R(r_i) q_i`` with ``R(r)`` orthogonal,
so the logit is ``q_i^T R(r_i)^T R(r_j) k_j``. Where ``R(r) = exp(x A_x +
y A_y)`` with commuting skew-symmetric generators ``A_x, A_y``,
``R(r_i)^T R(r_j) = R(r_j - r_i)``: the logit depends on the offset only
(relative-position invariance; RoPE-Axial/Mixed, ComRoPE, STRING, Spiral).

* **Spiral RoPE** (Liu et al., arXiv 2602.03227): the ``D/2`` channel pairs
  form ``K`` groups; group ``k`` rotates with the projection of the position
  onto direction ``phi_k = k pi / K`` (uniform over the half circle), pair
  ``t`` of a group at magnitude ``theta ** (-t / (D / 2K))``. Fixed
  (no parameters); ``K = 2`` is RoPE-Axial (:func:`spiral_frequencies`).
* **ComRoPE** (Yu et al., CVPR 2025, "trainable commuting angle matrices"):
  ``A_a = diag(B_a1 .. B_am)`` with ``b x b`` skew blocks that commute within
  each block index. ComRoPE-LD (linearly dependent): ``B_aj = s_aj (P_j -
  P_j^T)``, one trainable ``P_j`` per head and block and trainable scalars
  ``s_aj`` per axis and block; ComRoPE-AP (axis partition): block ``j``
  rotates with axis ``j mod 2`` only, ``B_aj = P_j - P_j^T``
  (:func:`comrope_generators`). With ``b = 2`` LD is RoPE-Mixed with
  frequencies ``s_aj p_j`` and AP is RoPE-Axial-like (pairs alternate
  between the axes).
* **LieRE** (Ostmeier et al., 2024): ``R(r) = exp(x A_x + y A_y)`` with
  *unconstrained* learned skew-symmetric generators (block-diagonal with
  ``b x b`` blocks, :func:`liere_generators`); they need not commute, so
  the logit is not exactly a function of the offset (tested).
* **STRING** (Schenck et al., ICML 2025): ``R(r) = P^T RoPE(r) P`` with a
  learned orthogonal ``P`` (Cayley-STRING: ``P = (I - S)(I + S)^{-1}``, ``S``
  skew-symmetric, :func:`cayley`). Since ``P^T`` cancels in the logit the
  attention applies ``RoPE(r) P`` (the ``P`` can be folded into the query /
  key projections for inference); ``S = 0`` at initialisation, i.e.
  RoPE-Mixed.
* **LookHere** (Fuller et al., NeurIPS 2024): no rotation; head ``h`` sees
  only the keys in its field of view (a half plane / quadrant / 45-degree
  wedge pointing up, down, left or right) with the logit penalised by
  ``slope_h * slope_l * global_slope * |r_i - r_j|`` (:func:`lookhere_bias`).
* **Test-time frequency scaling** for extrapolation to grids larger than the
  training grid: every linear-angle scheme here and in :mod:`.rope` takes
  ``freq_scaling=dict(method=, train_grid=)``
  (:class:`~.rope.FrequencyScaling`; the maths in
  :func:`~.rope_functional.scale_frequencies`).

Channel layout: rotary schemes act on contiguous blocks of ``b`` channels
(``b = 2``: pairs ``(2t, 2t+1)``, the ``'pairs'`` layout of
:mod:`.rope`), and the 2x2 rotation of angle ``a`` is
``exp(a [[0, -1], [1, 0]])``, as :func:`~.rope.apply_rope`.
"""
import math
from typing import Optional, Sequence

import torch
import torch.nn as nn
from torch import Tensor

from mmpos.registry import POSITION_ENCODINGS
from .position import PositionScheme, PositionTable, per_window
from .rope import (LinearAngleRoPE, RoPETable, mixed_frequencies,
                   rope_angles)

LOOKHERE_FOVS = {
    # LookHere's head directions, cycled over the heads: the keys a head
    # sees (LH-180: half planes, LH-90: quadrants, LH-45: 45-degree wedges)
    180: ('up', 'down', 'left', 'right'),
    90: ('up-left', 'up-right', 'down-left', 'down-right'),
    45: ('up-left45', 'down-left45', 'left-up45', 'right-up45',
         'up-right45', 'down-right45', 'left-down45', 'right-down45'),
}


# ---------------------------------------------------------------- helpers
def skew(raw: Tensor) -> Tensor:
    """``raw - raw^T`` over the last two dims: skew-symmetric."""
    return raw - raw.transpose(-1, -2)


def upper_skew(raw: Tensor) -> Tensor:
    """Skew-symmetric matrix with ``raw``'s strict upper triangle above the
    diagonal (LieRE's parametrisation; the rest of ``raw`` is unused)."""
    upper = torch.triu(raw, diagonal=1)
    return upper - upper.transpose(-1, -2)


def cayley(s: Tensor) -> Tensor:
    """Cayley map ``(I - S)(I + S)^{-1}`` of skew-symmetric ``S`` ``(..., D,
    D)``: orthogonal with determinant 1 (``I + S`` is always invertible).
    ``(I - S)`` and ``(I + S)^{-1}`` commute, so this is ``solve(I + S,
    I - S)``."""
    eye = torch.eye(s.shape[-1], dtype=s.dtype, device=s.device)
    return torch.linalg.solve(eye + s, eye - s)


def finite_coords(coords: Tensor) -> Tensor:
    """``coords`` with NaN (tokens without position, e.g. DropPos' dropped
    ones) set to 0; the schemes give such tokens no position."""
    return coords.nan_to_num(0.)


# ---------------------------------------------------------- Spiral RoPE
def spiral_frequencies(head_dim: int, num_directions: int = 4,
                       theta: float = 100.) -> Tensor:
    """Spiral RoPE's fixed 2-D frequencies, shape ``(2, D/2)`` (row 0
    ``theta_x``, row 1 ``theta_y``, as :func:`~.rope.axial_frequencies`).

    Pairs ``k n .. (k + 1) n - 1`` (``n = D / (2K)``) form group ``k`` with
    direction ``phi_k = k pi / K``; pair ``t`` of a group has the frequency
    ``theta ** (-t / n) (cos phi_k, sin phi_k)``, so its angle is the
    magnitude times the projection ``x cos phi_k + y sin phi_k``. ``K = 2``
    gives exactly :func:`~.rope.axial_frequencies` (``axes='xy'``).
    """
    if head_dim % (2 * num_directions):
        raise ValueError(f'Spiral RoPE needs head_dim divisible by 2 * '
                         f'num_directions, got head_dim={head_dim}, '
                         f'num_directions={num_directions}')
    per_group = head_dim // (2 * num_directions)
    mag = theta**(-torch.arange(per_group, dtype=torch.float64) / per_group)
    phi = torch.arange(num_directions, dtype=torch.float64) * (
        math.pi / num_directions)
    # exact zeros on the axes (cos(pi / 2) is 6e-17 in floating point)
    cos = torch.where(phi == math.pi / 2, 0., torch.cos(phi))
    direction = torch.stack((cos, torch.sin(phi)))  # (2, K)
    return (direction[:, :, None] * mag).flatten(1).float()


# ------------------------------------------------ generator-based schemes
def comrope_generators(base: Tensor,
                       scales: Optional[Tensor] = None) -> Tensor:
    """ComRoPE's angle matrices, block form ``(heads, 2, m, b, b)``.

    Args:
        base: ``(heads, m, b, b)`` trainable ``P_j``; the blocks are
            ``P_j - P_j^T``.
        scales: ComRoPE-LD: ``(2, m)`` trainable ``s_aj``, ``B_aj = s_aj
            (P_j - P_j^T)`` (all blocks of index ``j`` are multiples of one
            skew matrix, hence commute). ``None``: ComRoPE-AP, block ``j``
            belongs to axis ``j mod 2`` (zero for the other axis).
    """
    blocks = skew(base)[:, None]  # (heads, 1, m, b, b)
    if scales is not None:
        return blocks * scales[None, :, :, None, None]
    m = base.shape[1]
    owner = torch.arange(m, device=base.device) % 2
    mask = owner == torch.arange(2, device=base.device)[:, None]  # (2, m)
    return blocks * mask[None, :, :, None, None].to(blocks.dtype)


def liere_generators(raw: Tensor) -> Tensor:
    """LieRE's generators ``(heads, 2, m, b, b)`` from raw parameters of the
    same shape: the strict upper triangles, made skew-symmetric
    (:func:`upper_skew`)."""
    return upper_skew(raw)


def block_rotations(coords: Tensor, generators: Tensor) -> Tensor:
    """``R(r) = exp(x A_x + y A_y)`` per token, block-diagonal.

    Args:
        coords: ``(B | 1, M, 2)`` positions (NaN: identity).
        generators: ``(heads, 2, m, b, b)`` skew-symmetric blocks.

    Returns:
        ``(B | 1, heads, M, m, b, b)`` rotation blocks, computed in fp32 at
        least (``torch.matrix_exp``).
    """
    dtype = torch.promote_types(generators.dtype, torch.float32)
    xy = finite_coords(coords).to(dtype)
    gen = generators.to(dtype)
    # (B, 1, M, 1, 1, 1) * (heads, m, b, b) summed over the two axes
    log_r = (xy[:, None, :, 0, None, None, None] * gen[:, 0, None] +
             xy[:, None, :, 1, None, None, None] * gen[:, 1, None])
    return torch.matrix_exp(log_r)


def apply_block_rotations(x: Tensor, rotations: Tensor) -> Tensor:
    """Rotate ``x`` ``(..., heads, M, D)`` blockwise by ``rotations``
    ``(..., heads | 1, M, m, b, b)`` (``m b = D``): block ``j`` of token
    ``i`` becomes ``R_ij x_ij``. Runs in the rotations' dtype, returns
    ``x.dtype``."""
    m, b = rotations.shape[-3], rotations.shape[-1]
    y = x.to(rotations.dtype).unflatten(-1, (m, b))
    # a broadcasting matmul (ONNX MatMul; the exporter crashed on einsum)
    out = torch.matmul(rotations, y.unsqueeze(-1)).squeeze(-1)
    return out.flatten(-2).to(x.dtype)


# ------------------------------------------------------------- LookHere
def _fov_visible(dx: Tensor, dy: Tensor, direction: str) -> Tensor:
    """Keys at offsets ``(dx, dy) = r_key - r_query`` (``y`` grows downward,
    the row index) inside a head's field of view; the query's own position
    is always inside (boundaries included)."""
    half = dict(up=dy <= 0, down=dy >= 0, left=dx <= 0, right=dx >= 0)
    if direction in half:
        return half[direction]
    if direction.endswith('45'):
        # 45-degree wedge: the 90-degree cone around the first direction
        # (|cross offset| <= along offset) cut by the second's half plane
        first, second = direction[:-2].split('-')
        along = dict(up=-dy, down=dy, left=-dx, right=dx)[first]
        cross = dx if first in ('up', 'down') else dy
        return (cross.abs() <= along) & half[second]
    first, second = direction.split('-')
    return half[first] & half[second]


def lookhere_directions(num_heads: int, fov: int = 180) -> list:
    """Direction of each head: LookHere's directions for ``fov`` (four;
    eight for 45 degrees) cycled over the heads (:data:`LOOKHERE_FOVS`)."""
    if fov not in LOOKHERE_FOVS:
        raise ValueError(f'LookHere fov must be one of '
                         f'{sorted(LOOKHERE_FOVS)}, got {fov!r}')
    dirs = LOOKHERE_FOVS[fov]
    return [dirs[h % len(dirs)] for h in range(num_heads)]


def lookhere_head_slopes(num_heads: int) -> Tensor:
    """``2 ** -(1 + h // 4)``: the four heads of each direction cycle share a
    slope, halved from one cycle to the next (LookHere's code)."""
    return torch.exp2(-(1. + torch.arange(num_heads) // 4))


def lookhere_bias(coords: Tensor,
                  directions: Sequence[str],
                  slopes: Tensor,
                  distance: str = 'linear') -> Tensor:
    """LookHere's additive attention bias over the patch tokens.

    Args:
        coords: ``(B | 1, M, 2)`` positions ``(x, y)`` (patch units; NaN:
            no position, bias 0 to and from it).
        directions: per head, see :func:`lookhere_directions`.
        slopes: ``(..., heads)`` distance penalties (head slope times layer
            and global slope), e.g. ``(depth, heads)`` for all blocks.
        distance: ``'linear'`` (Euclidean), ``'sqrt'`` or ``'square'``.

    Returns:
        ``(..., B | 1, heads, M, M)`` float32: ``-slope_h d(r_i, r_j)``
        where key ``j`` is in query ``i``'s field of view for head ``h``,
        else the most negative float32 (LookHere's masks; finite, so no
        row is ever all ``-inf``).
    """
    xy = coords.float()
    off = xy[:, None, :, :] - xy[:, :, None, :]  # (B, M_q, M_k, 2)
    dx, dy = off[..., 0], off[..., 1]
    dist = off.norm(dim=-1)
    dist = dict(linear=dist, sqrt=dist.sqrt(),
                square=dist.square())[distance]
    missing = dist.isnan()
    visible = torch.stack([
        _fov_visible(dx, dy, direction) | missing for direction in directions
    ], dim=1)  # (B, heads, M, M)
    slopes = slopes.to(dist)[..., None, :, None, None]  # (..., 1, heads, 1, 1)
    bias = -slopes * dist.nan_to_num(0.)[:, None]
    return bias.masked_fill(~visible, torch.finfo(torch.float32).min)


# ============================================================== tables
class BasisRoPETable(PositionTable):
    """RoPE after a per-head orthogonal change of basis (STRING):
    ``RoPE(r) P x`` on the patch tokens (the prefix tokens unchanged).

    Args:
        rope: the :class:`~.rope.RoPETable` of the 2x2 rotations.
        basis: ``(heads, D, D)`` orthogonal ``P``.
    """

    def __init__(self, rope: RoPETable, basis: Tensor):
        self.rope, self.basis = rope, basis
        self.num_tokens = rope.num_tokens

    def rotate(self, x: Tensor) -> Tensor:
        m = self.num_tokens
        patches = torch.matmul(x[..., -m:, :].to(self.basis.dtype),
                               self.basis.transpose(-1, -2)).to(x.dtype)
        x = patches if x.shape[-2] == m else torch.cat(
            (x[..., :-m, :], patches), dim=-2)
        return self.rope.rotate(x)

    def export(self) -> 'BasisRoPETable':
        """The real cos/sin path of the rotation (ONNX)."""
        return BasisRoPETable(self.rope.export(), self.basis)


class BlockRotationTable(PositionTable):
    """Per-token block rotations (ComRoPE, LieRE): ``rotations`` ``(n,
    heads, M, m, b, b)`` (:func:`block_rotations`); also the export table
    (a matmul and reshapes only)."""

    def __init__(self, rotations: Tensor):
        self.rotations = rotations
        self.num_tokens = rotations.shape[-4]

    def rotate_patches(self, x: Tensor) -> Tensor:
        y = per_window(x, self.rotations.shape[0])
        return apply_block_rotations(y, self.rotations).reshape(x.shape)


class BiasTable(PositionTable):
    """Bias-only table (LookHere): ``attn_bias`` ``(n, heads, M, M)``."""

    def __init__(self, attn_bias: Tensor):
        self.attn_bias = attn_bias
        self.num_tokens = attn_bias.shape[-1]


# =========================================================== schemes
@POSITION_ENCODINGS.register_module(name='spiral')
class SpiralRoPE(LinearAngleRoPE):
    """Spiral RoPE (arXiv 2602.03227): fixed frequencies along
    ``num_directions`` directions (:func:`spiral_frequencies`); one table
    shared by all blocks.

    Args:
        head_dim, num_heads, depth, coords: :class:`~.position.PositionScheme`.
        num_directions: ``K`` (``head_dim`` divisible by ``2 K``); 2 is
            RoPE-Axial. Default 4 (0, 45, 90, 135 degrees).
        theta: frequency base (100, as RoPE-Axial, for the patch frame).
        layout, impl, freq_scaling: as :class:`~.rope.AxialRoPE`.

    ``freqs``: ``(2, D/2)`` buffer (not saved in checkpoints).
    """
    shared = True

    def __init__(self, head_dim: int, num_heads: int, depth: int,
                 num_directions: int = 4, theta: float = 100., **kwargs):
        super().__init__(head_dim, num_heads, depth, **kwargs)
        self.num_directions, self.theta = num_directions, float(theta)
        self.register_buffer(
            'freqs', spiral_frequencies(head_dim, num_directions, theta),
            persistent=False)

    def extra_repr(self) -> str:
        return f'num_directions={self.num_directions}, theta={self.theta}'

    def angles(self, index: int, coords: Tensor) -> Tensor:
        return rope_angles(coords,
                           self.frequencies(self.freqs).to(coords.dtype))


@POSITION_ENCODINGS.register_module(name='string')
class STRINGRoPE(LinearAngleRoPE):
    """Cayley-STRING (Schenck et al., ICML 2025): ``RoPE(r) P`` per block
    and head, RoPE-Mixed's learnable frequencies after a learned orthogonal
    change of basis ``P = (I - S)(I + S)^{-1}`` (:func:`cayley`, ``S`` =
    :func:`upper_skew` of ``basis.<i>``). ``basis.<i> = 0`` at
    initialisation, i.e. ``P = I``: exactly RoPE-Mixed. The logit is ``q^T
    P^T RoPE(r_j - r_i) P k``, so ``P`` folds into the query / key
    projections for inference (:meth:`folded_basis`).

    Args:
        head_dim, num_heads, depth, coords: :class:`~.position.PositionScheme`.
        theta: RoPE-Mixed's frequency base (10, patch frame).
        rotate_init: RoPE-Mixed's random direction per head at init.
        freq_scaling: as :class:`~.rope.AxialRoPE` (the RoPE part).

    Parameters (per block ``i``):
        freqs.<i>: ``(2, heads, D/2)`` RoPE-Mixed frequencies
            (:func:`~.rope.mixed_frequencies`).
        basis.<i>: ``(heads, D, D)``, zeros; only the strict upper triangle
            is used.
    """

    def __init__(self, head_dim: int, num_heads: int, depth: int,
                 theta: float = 10., rotate_init: bool = True,
                 coords: Optional[dict] = None,
                 freq_scaling: Optional[dict] = None):
        super().__init__(head_dim, num_heads, depth, coords=coords,
                         freq_scaling=freq_scaling)
        self.theta = float(theta)
        self.freqs = nn.ParameterList(
            nn.Parameter(mixed_frequencies(head_dim, num_heads, theta,
                                           rotate_init))
            for _ in range(depth))
        self.basis = nn.ParameterList(
            nn.Parameter(torch.zeros(num_heads, head_dim, head_dim))
            for _ in range(depth))

    def extra_repr(self) -> str:
        return f'theta={self.theta}'

    def folded_basis(self, index: int) -> Tensor:
        """Block ``index``'s orthogonal ``P``, ``(heads, D, D)``, fp32 at
        least."""
        raw = self.basis[index]
        return cayley(upper_skew(
            raw.to(torch.promote_types(raw.dtype, torch.float32))))

    def angles(self, index: int, coords: Tensor) -> Tensor:
        return rope_angles(coords,
                           self.frequencies(self.freqs[index]).to(
                               coords.dtype))

    def block_table(self, index: int, coords: Tensor) -> BasisRoPETable:
        return BasisRoPETable(super().block_table(index, coords),
                              self.folded_basis(index))


class _GeneratorRoPE(PositionScheme):
    """Schemes ``R(r) = exp(x A_x + y A_y)`` with per-block generators:
    subclasses give :meth:`generators`; ``position_scale`` multiplies the
    positions first."""

    def __init__(self, head_dim, num_heads, depth, position_scale=1.,
                 coords=None):
        super().__init__(head_dim, num_heads, depth, coords)
        self.position_scale = float(position_scale)

    def generators(self, index: int) -> Tensor:
        """Block ``index``'s ``(heads, 2, m, b, b)`` skew generators."""
        raise NotImplementedError

    def block_table(self, index: int, coords: Tensor) -> BlockRotationTable:
        return BlockRotationTable(block_rotations(
            coords * self.position_scale, self.generators(index)))


@POSITION_ENCODINGS.register_module(name='comrope')
class ComRoPE(_GeneratorRoPE):
    """ComRoPE (Yu et al., CVPR 2025): ``R(r) = exp(x A_x + y A_y)`` with
    trainable commuting block-diagonal angle matrices
    (:func:`comrope_generators`), per block and head.

    Args:
        head_dim, num_heads, depth, coords: :class:`~.position.PositionScheme`.
        variant: ``'ld'`` (ComRoPE-LD, the paper's best) or ``'ap'``
            (ComRoPE-AP).
        block_size: ``b`` (``head_dim`` divisible by it; by ``2 b`` for
            ``'ap'``), 8 by default.
        init_std: std of the normal init of ``base`` (1; ``scales`` are
            ``N(0, 1)``), as ComRoPE's code.
        position_scale: the positions are multiplied by it first.
            ComRoPE's code places the training grid in ``[0, 1]`` (patch
            centre ``(p + 0.5) / n`` for an ``n``-patch side): in the patch
            frame ``1 / n`` (e.g. 1/14 for 224 px and 16 px patches) gives
            its angles, and larger inputs extend beyond 1 (extrapolation,
            as its code). Default 1.

    Parameters (per block ``i``, ``m = D / b``):
        base.<i>: ``(heads, m, b, b)`` ``P_j``.
        scales.<i>: ``(2, m)`` ComRoPE-LD's per-axis multipliers.
    """

    def __init__(self, head_dim: int, num_heads: int, depth: int,
                 variant: str = 'ld', block_size: int = 8,
                 init_std: float = 1., position_scale: float = 1.,
                 coords: Optional[dict] = None):
        super().__init__(head_dim, num_heads, depth, position_scale, coords)
        if variant not in ('ld', 'ap'):
            raise ValueError(f"ComRoPE variant must be 'ld' or 'ap', got "
                             f'{variant!r}')
        step = block_size * (2 if variant == 'ap' else 1)
        if head_dim % step:
            raise ValueError(f'ComRoPE-{variant.upper()} needs head_dim '
                             f'divisible by {step}, got {head_dim}')
        self.variant, self.block_size = variant, block_size
        m = head_dim // block_size
        self.base = nn.ParameterList(
            nn.Parameter(torch.randn(num_heads, m, block_size, block_size) *
                         init_std) for _ in range(depth))
        self.scales = nn.ParameterList(
            nn.Parameter(torch.randn(2, m))
            for _ in range(depth)) if variant == 'ld' else None

    def extra_repr(self) -> str:
        return (f'variant={self.variant!r}, block_size={self.block_size}, '
                f'position_scale={self.position_scale}')

    def generators(self, index: int) -> Tensor:
        return comrope_generators(
            self.base[index],
            None if self.scales is None else self.scales[index])


@POSITION_ENCODINGS.register_module(name='liere')
class LieRE(_GeneratorRoPE):
    """LieRE (Ostmeier et al., 2024): ``R(r) = exp(x A_x + y A_y)`` with
    learned, unconstrained skew-symmetric generators (block-diagonal,
    ``b x b`` blocks; :func:`liere_generators`), per block and head. The
    generators need not commute: logits are not exactly relative.

    Args:
        head_dim, num_heads, depth, coords: :class:`~.position.PositionScheme`.
        block_size: ``b`` (LieRE's ``generator_dim``), 8 by default.
        init_range: the strict upper triangles start ``U[0, init_range)``
            (``2 pi``, as LieRE's code).
        position_scale: the positions are multiplied by it first. LieRE's
            code spans ``[0, 1]`` from the first to the last patch of the
            training grid: ``1 / (n - 1)`` in the patch frame for an
            ``n``-patch side; larger inputs extend beyond 1. Default 1.

    Parameters (per block ``i``): generators.<i>: ``(heads, 2, m, b, b)``
    raw generator entries (``m = D / b``).
    """

    def __init__(self, head_dim: int, num_heads: int, depth: int,
                 block_size: int = 8, init_range: float = 2 * math.pi,
                 position_scale: float = 1., coords: Optional[dict] = None):
        super().__init__(head_dim, num_heads, depth, position_scale, coords)
        if head_dim % block_size:
            raise ValueError(f'LieRE needs head_dim divisible by block_size '
                             f'{block_size}, got {head_dim}')
        self.block_size = block_size
        m = head_dim // block_size
        self.generators_raw = nn.ParameterList(
            nn.Parameter(torch.rand(num_heads, 2, m, block_size, block_size)
                         * init_range) for _ in range(depth))

    def extra_repr(self) -> str:
        return (f'block_size={self.block_size}, '
                f'position_scale={self.position_scale}')

    def generators(self, index: int) -> Tensor:
        return liere_generators(self.generators_raw[index])


@POSITION_ENCODINGS.register_module(name='lookhere')
class LookHere(PositionScheme):
    """LookHere (Fuller et al., NeurIPS 2024): directed attention masks and
    distance penalties (:func:`lookhere_bias`); no rotation, no parameters.

    Args:
        head_dim, num_heads, depth, coords: :class:`~.position.PositionScheme`
            (the patch frame: the penalty is per patch of distance).
        fov: field of view per head, 180 (LH-180, half planes), 90
            (quadrants) or 45 (wedges); directions cycle over the heads.
        global_slope: overall distance penalty (1).
        layer_slopes: ``(first, last)``: block ``l``'s slope, linear from
            ``first`` to ``last`` over the depth (``(1, 1)``).
        distance: ``'linear'``, ``'sqrt'`` or ``'square'``.

    ``slopes``: ``(depth, heads)`` buffer (not saved).
    """

    def __init__(self, head_dim: int, num_heads: int, depth: int,
                 fov: int = 180, global_slope: float = 1.,
                 layer_slopes: Sequence[float] = (1., 1.),
                 distance: str = 'linear', coords: Optional[dict] = None):
        super().__init__(head_dim, num_heads, depth, coords)
        if distance not in ('linear', 'sqrt', 'square'):
            raise ValueError("LookHere distance must be 'linear', 'sqrt' or "
                             f"'square', got {distance!r}")
        self.fov = fov
        self.directions = lookhere_directions(num_heads, fov)
        self.global_slope = float(global_slope)
        self.layer_slopes = tuple(float(v) for v in layer_slopes)
        self.distance = distance
        self.register_buffer(
            'slopes',
            global_slope * torch.linspace(*self.layer_slopes, depth)[:, None]
            * lookhere_head_slopes(num_heads),
            persistent=False)

    def extra_repr(self) -> str:
        return (f'fov={self.fov}, global_slope={self.global_slope}, '
                f'layer_slopes={self.layer_slopes}, '
                f'distance={self.distance!r}')

    def tables(self, coords: Sequence[Optional[Tensor]], hw=None) -> list:
        """All blocks' biases from one :func:`lookhere_bias` call per
        distinct coordinate tensor (the masks and distances are shared)."""
        out, done = [], {}
        for i, c in enumerate(coords):
            if c is None:
                out.append(None)
                continue
            if id(c) not in done:
                done[id(c)] = lookhere_bias(c, self.directions, self.slopes,
                                            self.distance)
            out.append(BiasTable(done[id(c)][i]))
        return out

    def block_table(self, index: int, coords: Tensor) -> BiasTable:
        return BiasTable(lookhere_bias(coords, self.directions,
                                       self.slopes[index], self.distance))
