"""Linear-angle RoPE: channel pair ``t`` of a head turns by ``a_t = f_t . r``
at position ``r = (x, y)`` (Heo et al., "Rotary Position Embedding for
Vision Transformer", ECCV 2024, Eq. 11 and 14), so query-key logits depend
on ``r_q - r_k`` only (Eq. 15); frequencies ``f_t`` ``(2, [heads,] D/2)``,
rows ``x``, ``y``. Pair ``t`` is channels ``(2t, 2t + 1)`` (``layout=
'pairs'``, Sec. 3.1) or ``(t, t + D/2)`` (``'half'``: rotate-half, DINOv3,
timm); the first ``D/4`` pairs turn with ``x`` (``axes='xy'``) or ``y``
(``'yx'``, DINOv3). Prefix tokens and ``NaN`` positions get angle 0.
"""
import copy
import math
from typing import Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from .base import (PositionScheme, PositionTable, check_choice,
                   geometric_magnitudes, options_repr, per_window)

LAYOUTS = ('pairs', 'half')
AXES = ('xy', 'yx')
FREQ_SCALINGS = ('pi', 'ntk', 'yarn')


# ------------------------------------------------------------ frequencies
def frequency_magnitudes(head_dim: int, theta: Optional[float] = None,
                         periods: Optional[dict] = None) -> Tensor:
    """One axis' magnitudes, fp64 ``(D/4,)``: ``theta ** (-t / (D/4))``
    (Eq. 13) or DINOv3's ``2 pi / p_t``, ``p_t = base ** (t / (D/4))`` or
    geometric from ``min_period`` to ``max_period`` (``periods``)."""
    if (theta is None) == (periods is None):
        raise ValueError('give either theta or periods, got theta='
                         f'{theta}, periods={periods}')
    if periods is None:
        return geometric_magnitudes(head_dim, theta)
    quarter = geometric_magnitudes(head_dim, 1.).numel()
    if set(periods) == {'base'}:
        p = periods['base']**(torch.arange(quarter, dtype=torch.float64) /
                              quarter)
    elif set(periods) == {'min_period', 'max_period'}:
        lo, hi = float(periods['min_period']), float(periods['max_period'])
        if not 0 < lo <= hi:
            raise ValueError('periods need 0 < min_period <= max_period, '
                             f'got {periods}')
        p = lo * (hi / lo)**torch.linspace(0, 1, quarter, dtype=torch.float64)
    else:
        raise ValueError('periods must be dict(base=...) or dict(min_period='
                         f'..., max_period=...), got {periods}')
    return 2 * math.pi / p


def mixed_frequencies(head_dim: int, num_heads: int, theta: float = 10.,
                      rotate: bool = True) -> Tensor:
    """RoPE-Mixed's initial frequencies (Eq. 14), fp32 ``(2, heads, D/2)``:
    per head a direction ``phi ~ U[0, 2 pi)`` (0 without ``rotate``: axial);
    pair ``t < D/4`` gets ``m_t (cos phi, sin phi)``, pair ``t + D/4`` ``m_t
    (-sin phi, cos phi)``, ``m_t = theta ** (-t / (D/4))``."""
    mag = geometric_magnitudes(head_dim, theta)  # (D/4,)
    phi = (torch.rand(num_heads, 1, dtype=torch.float64) * (2 * math.pi)
           if rotate else torch.zeros(num_heads, 1, dtype=torch.float64))
    cos, sin = torch.cos(phi) * mag, torch.sin(phi) * mag  # (heads, D/4)
    freqs_x = torch.cat((cos, -sin), dim=-1)  # (heads, D/2)
    freqs_y = torch.cat((sin, cos), dim=-1)
    return torch.stack((freqs_x, freqs_y)).float()


def spiral_frequencies(head_dim: int, num_directions: int = 4,
                       theta: float = 100.) -> Tensor:
    """Spiral RoPE's frequencies (Liu et al., arXiv 2602.03227), fp32 ``(2,
    D/2)``: pairs ``k n .. (k + 1) n - 1`` (``n = D / 2K``) turn with ``r``'s
    projection on ``phi_k = k pi / K``, pair ``t`` of a group at ``theta **
    (-t / n)``. ``K = 2`` is RoPE-Axial."""
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
    return (direction[:, :, None] * mag).flatten(1).float()  # (2, K n)


def golden_gate_frequencies(head_dim: int, num_heads: int,
                            min_freq: float = 0.01, max_freq: float = 1.,
                            zero_fraction: float = 0.) -> Tensor:
    """Golden Gate RoPE's frequencies (J. Xiong, "golden gate" n-D RoPE,
    jerryxio.ng/posts/nd-rope, 2025), fp32 ``(2, heads, D/2)``: pair ``f``
    of head ``h`` turns with ``r``'s projection on direction ``u_{h F +
    f}`` (``F = D/2``) at magnitude ``w_f``.

    Magnitudes ``(F,)``: ``round(zero_fraction F)`` zeros (pairs that never
    turn), then geometric from ``min_freq`` to ``max_freq`` radians per
    coordinate unit. Directions ``(heads F, 2)``: point ``i = 1..heads F``
    of the 2-D R-sequence (``z_i = frac(i g^-1), frac(i g^-2)``, ``g`` the
    plastic number, ``g^3 = g + 1``), mapped through the normal quantile
    and normalised: unit vectors spread evenly over the circle, no two the
    same. Their components are (row, column) as in the reference, so
    ``u_k = (u_k^y, u_k^x)``."""
    if not 0. <= zero_fraction <= 1.:
        raise ValueError(f'Golden Gate zero_fraction must lie in [0, 1], '
                         f'got {zero_fraction}')
    if not 0. < min_freq <= max_freq:
        raise ValueError('Golden Gate needs 0 < min_freq <= max_freq, got '
                         f'min_freq={min_freq}, max_freq={max_freq}')
    pairs = head_dim // 2
    zeros = round(zero_fraction * pairs)
    mag = torch.cat((torch.zeros(zeros, dtype=torch.float64),
                     min_freq * (max_freq / min_freq)**torch.linspace(
                         0, 1, pairs - zeros, dtype=torch.float64)))
    g = 1.3247179572447460  # the plastic number: x^3 = x + 1
    alpha = g**-torch.arange(1, 3, dtype=torch.float64)  # (2,)
    i = torch.arange(1, num_heads * pairs + 1, dtype=torch.float64)
    z = torch.fmod(i[:, None] * alpha, 1.)  # (heads F, 2), in (0, 1)
    u = F.normalize(torch.erfinv(2 * z - 1), dim=-1)  # (row, col)
    u = u.view(num_heads, pairs, 2) * mag[:, None]  # (heads, F, 2)
    return torch.stack((u[..., 1], u[..., 0])).float()  # x, y rows


def scale_frequencies(freqs: Tensor, scale: float, method: str = 'ntk',
                      train_extent: Optional[float] = None,
                      alpha: float = 1., beta: float = 32.) -> Tensor:
    """Frequencies ``(2, [heads,] K)`` for a grid ``s = scale > 1`` times
    the training grid, each ``f_t`` scaled as a whole. ``'pi'`` (position
    interpolation): ``f / s``; ``'ntk'``: ``f s ** (-g)``, ``g = log(|f|_max
    / |f|) / log(|f|_max / |f|_min)``; ``'yarn'`` (NTK-by-parts, Peng et al.
    2023): ``f ((1 - g) / s + g)``, ``g = clip((r - alpha) / (beta - alpha),
    0, 1)`` of ``r = train_extent |f| / 2 pi`` turns over the grid."""
    check_choice('frequency scaling', method, FREQ_SCALINGS)
    if scale <= 1.:
        return freqs
    mag = freqs.norm(dim=0, keepdim=True)  # (1, [heads,] K)
    if method == 'pi':
        return freqs / scale
    if method == 'ntk':
        top = mag.amax(-1, keepdim=True)
        bottom = mag.amin(-1, keepdim=True)
        g = torch.log(top / mag) / torch.log(top / bottom).clamp_min(1e-12)
        return freqs * scale**(-g)
    if train_extent is None:
        raise ValueError("frequency scaling 'yarn' needs train_extent (the "
                         'training grid side in coordinate units)')
    turns = train_extent * mag / (2 * math.pi)
    g = ((turns - alpha) / (beta - alpha)).clamp(0., 1.)
    return freqs * ((1 - g) / scale + g)


class FrequencyScaling:
    """Test-time frequency scaling (``freq_scaling=dict(...)``): on a grid
    ``s = max(H / H0, W / W0) > 1`` times the ``train_grid`` ``(H0, W0)``
    (or ``n``), :func:`scale_frequencies` by ``method`` (``alpha``,
    ``beta``: YaRN's turn thresholds over ``max(H0, W0)`` patches) and, with
    ``temperature`` (default: for ``'yarn'``), queries and keys times YaRN's
    ``sqrt(1 / t) = 0.1 ln s + 1`` (folded into the rotation as in YaRN's
    cos / sin tables)."""

    def __init__(self, method: str = 'yarn',
                 train_grid: Union[int, Sequence[int], None] = None,
                 alpha: float = 1., beta: float = 32.,
                 temperature: Optional[bool] = None):
        check_choice('freq_scaling method', method, FREQ_SCALINGS)
        if train_grid is None:
            raise ValueError('freq_scaling needs train_grid, the training '
                             'patch grid (e.g. train_grid=14 for 224 px '
                             'inputs and 16 px patches)')
        grid = ((train_grid, ) * 2 if isinstance(train_grid, (int, float))
                else tuple(train_grid))
        if len(grid) != 2 or min(grid) <= 0:
            raise ValueError(f'freq_scaling train_grid must be a positive '
                             f'side or (rows, cols), got {train_grid!r}')
        self.method, self.train_grid = method, grid
        self.alpha, self.beta = float(alpha), float(beta)
        self.temperature = (method == 'yarn' if temperature is None else
                            bool(temperature))

    def __repr__(self) -> str:
        return 'FrequencyScaling({})'.format(options_repr(
            self, ('method', 'train_grid', 'temperature')))

    def __call__(self, freqs: Tensor, hw: Sequence[int]
                 ) -> Tuple[Tensor, float]:
        """``freqs`` scaled for the grid ``hw = (H, W)`` and the factor on
        queries and keys."""
        s = max(hw[0] / self.train_grid[0], hw[1] / self.train_grid[1])
        return (scale_frequencies(freqs, s, self.method, max(self.train_grid),
                                  self.alpha, self.beta),
                0.1 * math.log(s) + 1. if self.temperature and s > 1 else 1.)


# ------------------------------------------------------------------ tables
def rope_angles(coords: Tensor, freqs: Tensor) -> Tensor:
    """``a_t = f_t . r`` (Eq. 14): coordinates ``([B,] N, 2)``, frequencies
    ``(2, [heads,] K)`` -> ``([B,] heads | 1, N, K)`` (elementwise)."""
    if freqs.dim() == 2:
        freqs = freqs.unsqueeze(1)  # (2, 1, K)
    xy = coords.unsqueeze(-3)  # (..., 1, N, 2)
    return torch.addcmul(xy[..., 0:1] * freqs[0].unsqueeze(-2), xy[..., 1:2],
                         freqs[1].unsqueeze(-2))


def _prefixed(t: Tensor, pad: int, value) -> Tensor:
    """``t`` ``(..., M, K)`` after ``pad`` rows of ``value`` (the prefix)."""
    if not pad:
        return t
    fill = torch.full_like(t[..., :1, :], value).expand(*t.shape[:-2], pad, -1)
    return torch.cat((fill, t), dim=-2)


class RoPETable(PositionTable):
    """One block's rotation of ``M`` tokens by ``m exp(i a_t)`` per pair:
    ``angles`` ``(n, heads | 1, M, D/2)`` in the dtype to rotate in,
    ``magnitude`` ``m`` on every channel, prefix tokens included (YaRN's
    temperature). Exported graphs rotate with :meth:`export`'s real cos /
    sin (ONNX has no complex tensors)."""

    def __init__(self, angles: Tensor, layout: str = 'pairs',
                 magnitude: float = 1.):
        self.num_tokens, self.layout = angles.shape[-2], layout
        self.angles, self.magnitude = angles, float(magnitude)
        self.phasors = None if torch.compiler.is_exporting() else torch.polar(
            torch.full_like(angles, self.magnitude), angles)

    def rotate_tokens(self, x: Tensor) -> Tensor:
        if self.phasors is None:
            return self.export().rotate_tokens(x)
        phasors = _prefixed(self.phasors, self.num_prefix(x), self.magnitude)
        y = per_window(x, phasors.shape[-4]).to(phasors.real.dtype)
        if self.layout == 'pairs':  # Eq. 11: pair t as y_r + i y_i
            pairs = y.unflatten(-1, (y.shape[-1] // 2, 2))
            # a view where the strides allow; compiled, the compiler picks
            # the layout and fuses the copy
            if torch.compiler.is_compiling() or pairs.storage_offset() % 2 \
                    or any(st % 2 for st in pairs.stride()[:-1]):
                pairs = pairs.contiguous()
            out = torch.view_as_real(torch.view_as_complex(pairs) *
                                     phasors).flatten(-2)
        else:
            re, im = y.chunk(2, dim=-1)  # (..., N, D/2) each
            rotated = torch.complex(re, im) * phasors
            out = torch.cat((rotated.real, rotated.imag), dim=-1)
        return out.to(x.dtype).reshape(x.shape)

    def export(self) -> 'CosSinTable':
        return CosSinTable(self.magnitude * self.angles.cos(),
                           self.magnitude * self.angles.sin(), self.layout,
                           self.magnitude)


class CosSinTable(PositionTable):
    """:meth:`RoPETable.export`: ``cos``, ``sin`` ``(n, heads | 1, M,
    D/2)`` hold ``m cos a_t``, ``m sin a_t``; ``y cos + swap(y) sin`` with
    full-width tables, ``swap`` exchanging the channels of each pair."""

    def __init__(self, cos: Tensor, sin: Tensor, layout: str,
                 magnitude: float):
        self.cos, self.sin, self.layout = cos, sin, layout
        self.num_tokens, self.magnitude = cos.shape[-2], magnitude

    def rotate_tokens(self, x: Tensor) -> Tensor:
        pad = self.num_prefix(x)
        cos = _prefixed(self.cos, pad, self.magnitude)
        sin = _prefixed(self.sin, pad, 0.)
        y = per_window(x, cos.shape[-4]).to(cos.dtype)
        if self.layout == 'pairs':  # (..., N, D): (c, c), (-s, s) per pair
            cos = torch.stack((cos, cos), -1).flatten(-2)
            sin = torch.stack((-sin, sin), -1).flatten(-2)
            # strided slices, not flip: exporters (ONNX -> TensorRT) take them
            swapped = torch.stack((y[..., 1::2], y[..., 0::2]),
                                  dim=-1).flatten(-2)
        else:
            cos, sin = torch.cat((cos, cos), -1), torch.cat((-sin, sin), -1)
            half = y.shape[-1] // 2
            swapped = torch.cat((y[..., half:], y[..., :half]), dim=-1)
        return torch.addcmul(y * cos, swapped, sin).to(x.dtype).reshape(
            x.shape)


class BasisRoPETable(PositionTable):
    """``RoPE(r) P x``: the :class:`RoPETable` ``rope`` after the per-head
    orthogonal ``basis`` ``P`` ``(heads, D, D)`` on every token (prefix
    and ``NaN`` tokens: ``P`` alone), computed in ``basis.dtype``."""

    def __init__(self, rope: PositionTable, basis: Tensor):
        self.rope, self.basis = rope, basis
        self.num_tokens = rope.num_tokens

    def rotate_tokens(self, x: Tensor) -> Tensor:
        y = torch.matmul(x.to(self.basis.dtype),
                         self.basis.transpose(-1, -2))  # P x per head
        return self.rope.rotate_tokens(y).to(x.dtype)

    def export(self) -> 'BasisRoPETable':
        return BasisRoPETable(self.rope.export(), self.basis)


# ----------------------------------------------------------------- schemes
class LinearAngleRoPE(PositionScheme):
    """Base of the linear-angle schemes: block ``i`` turns with
    :meth:`block_frequencies`, angles in their dtype promoted with the
    coordinates'. ``layout``: ``'pairs'`` / ``'half'``; ``coords``:
    :class:`~.base.PatchCoords` options; ``freq_scaling``:
    :class:`FrequencyScaling` options, in eval mode (patch frame only)."""

    def __init__(self, head_dim, num_heads, depth, layout='pairs',
                 coords=None, freq_scaling=None):
        super().__init__(head_dim, num_heads, depth, coords)
        self.layout = check_choice('RoPE layout', layout, LAYOUTS)
        if isinstance(freq_scaling, dict):
            freq_scaling = FrequencyScaling(**freq_scaling)
        if freq_scaling is not None and self.coords.frame != 'patch':
            raise ValueError(f'freq_scaling needs the patch coordinate frame,'
                             f' got frame={self.coords.frame!r} (a normalised'
                             ' frame keeps the extent of any grid)')
        self.freq_scaling = freq_scaling

    def block_frequencies(self, index: int) -> Tensor:
        """Block ``index``'s ``(2, [heads,] D/2)`` frequencies: ``freqs``
        (:attr:`shared`) or ``freqs.<index>``."""
        return self.freqs if self.shared else self.freqs[index]

    def block_table(self, index, coords, hw=None) -> RoPETable:
        freqs, magnitude = self.block_frequencies(index), 1.
        if self.freq_scaling is not None and hw is not None and \
                not self.training:
            freqs, magnitude = self.freq_scaling(freqs, hw)
        dtype = torch.promote_types(coords.dtype, freqs.dtype)
        xy = coords.nan_to_num(0.).to(dtype)  # (n, M, 2); NaN: angle 0
        angles = rope_angles(xy, freqs.to(dtype))  # (n, heads | 1, M, D/2)
        return RoPETable(angles.to(coords.dtype), self.layout, magnitude)


class AxialRoPE(LinearAngleRoPE):
    """RoPE-Axial (Eq. 12/13): fixed frequencies (``theta``, 100, or
    DINOv3's ``periods``: :func:`frequency_magnitudes`) shared by heads and
    blocks, pairs ``t < D/4`` turning with the first of ``axes``, the rest
    with the other. ``freqs``: ``(2, D/2)`` fp64 buffer (not saved); angles
    in fp64, then cast (exact to fp32 rounding at any coordinate)."""
    shared = True
    OPTIONS = ('theta', 'periods', 'axes', 'layout', 'freq_scaling')

    def __init__(self, head_dim, num_heads, depth, theta=None, periods=None,
                 axes='xy', **kwargs):
        super().__init__(head_dim, num_heads, depth, **kwargs)
        self.periods = dict(periods) if periods else None  # or theta
        self.theta = theta if self.periods else float(theta or 100.)
        self.axes = check_choice('RoPE axes', axes, AXES)
        mag = frequency_magnitudes(head_dim, self.theta, self.periods)
        freqs = torch.stack((F.pad(mag, (0, mag.numel())),  # x: first D/4
                             F.pad(mag, (mag.numel(), 0))))  # y: last D/4
        self.register_buffer('freqs', freqs if axes == 'xy' else freqs.flip(0),
                             persistent=False)

    def block_frequencies(self, index):
        return self.freqs.double()


class MixedRoPE(LinearAngleRoPE):
    """RoPE-Mixed (Eq. 14): learnable frequencies ``freqs.<i>`` ``(2,
    heads, D/2)`` per block, :func:`mixed_frequencies` at init (``theta``:
    10; ``rotate_init``: random directions, else axial)."""
    OPTIONS = ('theta', 'axes', 'layout', 'freq_scaling')

    def __init__(self, head_dim, num_heads, depth, theta=None,
                 rotate_init=True, axes='xy', **kwargs):
        super().__init__(head_dim, num_heads, depth, **kwargs)
        self.theta = float(theta or 10.)
        self.axes = check_choice('RoPE axes', axes, AXES)
        self.freqs = nn.ParameterList(nn.Parameter(mixed_frequencies(
            head_dim, num_heads, self.theta, rotate_init).flip(
                [0] if axes == 'yx' else [])) for _ in range(depth))


class DINOv3RoPE(AxialRoPE):
    """DINOv3's RoPE (Simeoni et al. 2025): axial with periods ``100 ** (t /
    (D/4))``, axes ``(row, col)``, rotate-half layout, patch centres in
    ``[-1, 1]`` and in training its ``DinoVisionTransformer``'s coordinate
    augmentation (per block, per batch, ``rescale=2`` as its released
    models). ``coords`` entries replace these one by one."""
    COORDS = dict(frame='separate', rescale=2., draw='per_block', per='batch')

    def __init__(self, head_dim, num_heads, depth, periods=dict(base=100.),
                 axes='yx', layout='half', coords=None, **kwargs):
        super().__init__(head_dim, num_heads, depth, periods=periods,
                         axes=axes, layout=layout,
                         coords={**self.COORDS, **(coords or {})}, **kwargs)


class SpiralRoPE(LinearAngleRoPE):
    """Spiral RoPE: fixed :func:`spiral_frequencies` of ``num_directions``
    ``K`` (4: 0, 45, 90, 135 degrees) and ``theta`` (100), shared by blocks;
    ``freqs``: ``(2, D/2)`` buffer (not saved)."""
    shared = True
    OPTIONS = ('num_directions', 'theta', 'layout', 'freq_scaling')

    def __init__(self, head_dim, num_heads, depth, num_directions=4,
                 theta=100., **kwargs):
        super().__init__(head_dim, num_heads, depth, **kwargs)
        self.num_directions, self.theta = num_directions, float(theta)
        self.register_buffer(
            'freqs', spiral_frequencies(head_dim, num_directions, theta),
            persistent=False)


class GoldenGateRoPE(LinearAngleRoPE):
    """Golden Gate RoPE: fixed :func:`golden_gate_frequencies` (every pair
    of every head its own direction; ``min_freq``, ``max_freq``,
    ``zero_fraction``), shared by blocks, in the reference's rotate-half
    layout; ``freqs``: ``(2, heads, D/2)`` buffer (not saved)."""
    shared = True
    OPTIONS = ('min_freq', 'max_freq', 'zero_fraction', 'layout',
               'freq_scaling')

    def __init__(self, head_dim, num_heads, depth, min_freq=0.01,
                 max_freq=1., zero_fraction=0., layout='half', **kwargs):
        super().__init__(head_dim, num_heads, depth, layout=layout, **kwargs)
        self.min_freq, self.max_freq = float(min_freq), float(max_freq)
        self.zero_fraction = float(zero_fraction)
        self.register_buffer('freqs', golden_gate_frequencies(
            head_dim, num_heads, self.min_freq, self.max_freq,
            self.zero_fraction), persistent=False)


def upper_skew(raw: Tensor) -> Tensor:
    """``U - U^T`` of ``raw``'s strict upper triangle ``U`` (last two dims):
    STRING's and LieRE's skew-symmetric parametrisation."""
    upper = torch.triu(raw, diagonal=1)
    return upper - upper.transpose(-1, -2)


def cayley(s: Tensor) -> Tensor:
    """Cayley map ``(I - S)(I + S)^{-1}`` of skew-symmetric ``S`` ``(..., D,
    D)``, orthogonal with determinant 1; the factors commute:
    ``solve(I + S, I - S)``."""
    eye = torch.eye(s.shape[-1], dtype=s.dtype, device=s.device)
    return torch.linalg.solve(eye + s, eye - s)


class STRINGRoPE(LinearAngleRoPE):
    """Cayley-STRING (Schenck et al., ICML 2025): ``RoPE(r) P``, RoPE-Mixed
    (``freqs.<i>``, ``theta``, ``rotate_init``; pairs layout) after a learned
    orthogonal ``P`` = :func:`cayley` of :func:`upper_skew` of ``basis.<i>``
    ``(heads, D, D)`` (0 at init: RoPE-Mixed), per block and head. ``P``
    applies to every token (``R(0) = P``), so logits are ``q^T P^T RoPE(r_k
    - r_q) P k`` and ``P`` folds into the projections (:meth:`fold_`)."""
    OPTIONS = ('theta', 'freq_scaling')

    def __init__(self, head_dim, num_heads, depth, theta=10.,
                 rotate_init=True, coords=None, freq_scaling=None):
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

    def folded_basis(self, index: int) -> Tensor:
        """Block ``index``'s ``P`` ``(heads, D, D)``, fp32 at least."""
        raw = self.basis[index]
        return cayley(upper_skew(
            raw.to(torch.promote_types(raw.dtype, torch.float32))))

    def block_table(self, index, coords, hw=None) -> PositionTable:
        return BasisRoPETable(super().block_table(index, coords, hw),
                              self.folded_basis(index))

    @torch.no_grad()
    def fold_(self, qkv: Sequence[nn.Linear]) -> MixedRoPE:
        """Fold block ``i``'s ``P`` into the query and key rows of ``qkv[i]``
        (``(3 C, C)``, rows ``q, k, v`` by head) in place, zero
        ``basis.<i>`` and return the RoPE-Mixed scheme that replaces this
        one: ``rope = rope.fold_([l.attn.qkv for l in backbone.layers])``."""
        if len(qkv) != self.depth:
            raise ValueError(f'STRING fold_ needs the qkv projection of each '
                             f'of its {self.depth} blocks, got {len(qkv)}')
        heads, dim = self.num_heads, self.head_dim
        for i, layer in enumerate(qkv):
            if layer.out_features != 3 * heads * dim:
                raise ValueError(f'STRING fold_: qkv[{i}] has '
                                 f'{layer.out_features} outputs, expected 3 x '
                                 f'{heads} heads x {dim}')
            basis = self.folded_basis(i).double()  # (heads, D, D)
            for param in (layer.weight, layer.bias):
                if param is None:
                    continue
                rows = param.unflatten(0, (3, heads, dim))  # (3, h, D[, C])
                qk = rows[:2].double()
                folded = torch.matmul(basis, qk if param.dim() == 2 else
                                      qk[..., None]).reshape(qk.shape)
                rows[:2] = folded.to(param.dtype)
            self.basis[i].zero_()
        mixed = MixedRoPE(dim, heads, self.depth, self.theta,
                          rotate_init=False, freq_scaling=self.freq_scaling)
        mixed.coords = copy.deepcopy(self.coords)
        mixed.to(self.freqs[0].device, self.freqs[0].dtype)
        for src, dst in zip(self.freqs, mixed.freqs):
            dst.copy_(src)
        return mixed.train(self.training)
