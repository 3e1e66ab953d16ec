"""2-D RoPE position schemes (Heo et al., "Rotary Position Embedding for
Vision Transformer", ECCV 2024; DINOv3): RoPE-Axial, RoPE-Mixed and DINOv3's
RoPE as :class:`~.position.PositionScheme` s, built from a backbone's
``rope=dict(type=...)``. Conventions and the functions they use:
:mod:`.rope_functional`.

Implementation. A scheme (:class:`AxialRoPE`, :class:`MixedRoPE`,
:class:`DINOv3RoPE`, registered as ``'axial'``, ``'mixed'``, ``'dinov3'``)
computes the angles of every block once per forward; its
:class:`RoPETable` rotates in one of two numerically equivalent ways
(``impl``):

* ``'fast'`` (default): one unit complex number ``exp(i a_t)`` per pair
  (:func:`rope_phasors`, ``(..., N, D/2)``) and one complex product per pair
  (:func:`apply_rope_phasors`; the ``'pairs'`` input is *viewed* as complex).
* ``'eager'``: the real reference, also the exported path (ONNX has no
  complex tensors): :func:`apply_rope` computes ``x * cos + swap_pairs(x) *
  sin`` with full-width tables, the sign of the sine folded in
  (:func:`rope_tables`).

Both run in fp32 for fp16/bf16 inputs and agree to rounding. RoPE-Axial's
fixed angles are computed in fp64 and then cast, RoPE-Mixed's learnable ones
in the coordinates' dtype (in the autograd graph).
"""
from typing import Optional, Sequence, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from mmpos.registry import POSITION_ENCODINGS
from .position import PositionScheme, PositionTable, per_window
from .rope_functional import (FREQ_SCALINGS, apply_rope,  # noqa: F401
                              apply_rope_phasors, axial_frequencies,
                              frequency_magnitudes, grid_coords,
                              mixed_frequencies, rope_angles, rope_phasors,
                              rope_tables, scale_frequencies,
                              sincos_pos_embed_2d, yarn_attention_factor)

ROPE_TYPES = ('axial', 'mixed')
ROPE_LAYOUTS = ('pairs', 'half')
ROPE_AXES = ('xy', 'yx')
ROPE_IMPLS = ('fast', 'eager')
#: the pre-``rope=dict`` backbone arguments, see :func:`rope_cfg_from_legacy`
LEGACY_ROPE_ARGS = ('rope_type', 'rope_theta', 'rope_periods', 'rope_axes',
                    'rope_layout', 'rope_coords')


class RoPETable(PositionTable):
    """One block's RoPE rotation of ``M`` patch tokens.

    Args:
        angles: ``(n, heads | 1, M, D/2)`` angles ``a_t`` of the pairs
            (:func:`rope_angles`), in the dtype to rotate in.
        layout: channel layout of the pairs (``'pairs'`` / ``'half'``).
        impl: ``'fast'`` (phasors, :func:`apply_rope_phasors`) or
            ``'eager'`` (cos/sin, :func:`apply_rope`).
        magnitude: factor on every query / key channel, prefix tokens
            included (YaRN's temperature, :func:`yarn_attention_factor`;
            1: a pure rotation).
    """

    def __init__(self, angles: Tensor, layout: str = 'pairs',
                 impl: str = 'fast', magnitude: float = 1.):
        self.num_tokens, self.layout, self.impl = (angles.shape[-2], layout,
                                                   impl)
        self.magnitude = float(magnitude)
        if impl == 'fast':  # m exp(i a): (n, heads | 1, M, D/2) complex
            self.half = torch.polar(
                torch.full_like(angles, self.magnitude), angles)
        else:  # m cos a, m sin a: (n, heads | 1, M, D/2) each
            self.half = (angles.cos() * self.magnitude,
                         angles.sin() * self.magnitude)

    def _table(self, num_tokens: int):
        """Phasors (fast) or full-width ``(cos, sin)`` (eager) for
        ``num_tokens >= M`` tokens, the leading ones angle 0 (times the
        magnitude)."""
        pad = num_tokens - self.num_tokens  # prefix tokens: angle 0

        def padded(t, value):
            if not pad:
                return t
            fill = torch.full_like(t[..., :1, :], value).expand(
                *t.shape[:-2], pad, -1)
            return torch.cat((fill, t), dim=-2)

        if self.impl == 'fast':
            return padded(self.half, self.magnitude)
        cos, sin = (padded(self.half[0], self.magnitude),
                    padded(self.half[1], 0.))
        if self.layout == 'pairs':  # (..., N, D): (cos, cos), (-sin, sin)
            return (torch.stack((cos, cos), -1).flatten(-2),
                    torch.stack((-sin, sin), -1).flatten(-2))
        return torch.cat((cos, cos), -1), torch.cat((-sin, sin), -1)

    def rotate(self, x: Tensor) -> Tensor:
        """Rotate ``x`` ``(..., B', heads, N, D)``: the last ``M`` tokens
        (Eq. 11), the leading ``N - M`` ones by angle 0 (unchanged)."""
        if x.shape[-2] < self.num_tokens:
            raise ValueError(f'{self.num_tokens} positions given for only '
                             f'{x.shape[-2]} tokens')
        table = self._table(x.shape[-2])
        n = (table[0] if self.impl == 'eager' else table).shape[-4]
        y = per_window(x, n)
        if self.impl == 'eager':
            out = apply_rope(y, *table, self.layout)
        else:
            out = apply_rope_phasors(y, table, self.layout)
        return out.reshape(x.shape)

    def rotate_patches(self, x: Tensor) -> Tensor:
        return self.rotate(x)

    def export(self) -> 'RoPETable':
        """The same rotation on the real cos/sin path (ONNX: no complex
        tensors)."""
        if self.impl == 'eager':
            return self
        table = RoPETable.__new__(RoPETable)
        table.num_tokens, table.layout, table.impl = (self.num_tokens,
                                                      self.layout, 'eager')
        table.magnitude = self.magnitude
        table.half = (self.half.real, self.half.imag)
        return table


class FrequencyScaling:
    """Test-time frequency scaling of a linear-angle RoPE scheme, the
    ``freq_scaling=dict(...)`` entry of its ``rope=dict(...)``: in eval mode,
    on a patch grid ``s = max(H / H0, W / W0) > 1`` times the training grid
    ``(H0, W0)``, every block rotates with :func:`scale_frequencies` of its
    frequencies (and, for YaRN, queries and keys carry
    :func:`yarn_attention_factor`). Training, and grids no larger than the
    training grid, are unchanged.

    Args:
        method: ``'pi'`` (position interpolation), ``'ntk'`` (NTK-aware) or
            ``'yarn'`` (NTK-by-parts).
        train_grid: the training patch grid, ``n`` or ``(H0, W0)`` (e.g.
            14 for 224 px and 16 px patches); required.
        alpha, beta: YaRN's turn thresholds over ``max(H0, W0)`` patches.
        temperature: apply YaRN's attention temperature (default: for
            ``'yarn'`` only, as YaRN).
    """

    def __init__(self, method: str = 'yarn',
                 train_grid: Union[int, Sequence[int], None] = None,
                 alpha: float = 1., beta: float = 32.,
                 temperature: Optional[bool] = None):
        if method not in FREQ_SCALINGS:
            raise ValueError(f'freq_scaling method must be one of '
                             f'{FREQ_SCALINGS}, got {method!r}')
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
        return (f'FrequencyScaling(method={self.method!r}, train_grid='
                f'{self.train_grid}, temperature={self.temperature})')

    def factor(self, hw: Sequence[int]) -> float:
        """``s``: the grid ``hw = (H, W)`` over the training grid."""
        return max(hw[0] / self.train_grid[0], hw[1] / self.train_grid[1])

    def frequencies(self, freqs: Tensor, scale: float) -> Tensor:
        """``freqs`` ``(2, [heads,] K)`` for a grid ``scale`` times the
        training grid."""
        return scale_frequencies(freqs, scale, self.method,
                                 max(self.train_grid), self.alpha, self.beta)

    def magnitude(self, scale: float) -> float:
        """The factor on queries and keys at ``scale``."""
        return yarn_attention_factor(scale) if self.temperature else 1.


class LinearAngleRoPE(PositionScheme):
    """Shared arguments of the linear-angle RoPE schemes (angles ``f_t .
    r``): ``layout``, ``impl``, the :class:`~.position.PatchCoords` options
    ``coords`` and test-time ``freq_scaling`` (:class:`FrequencyScaling`
    options; the patch frame only: a normalised frame keeps the extent of
    any grid, so there is nothing to rescale)."""

    def __init__(self, head_dim, num_heads, depth, layout='pairs',
                 impl='fast', coords=None, freq_scaling=None):
        super().__init__(head_dim, num_heads, depth, coords)
        for name, value, choices in (('layout', layout, ROPE_LAYOUTS),
                                     ('impl', impl, ROPE_IMPLS)):
            if value not in choices:
                raise ValueError(f'RoPE {name} must be one of {choices}, got '
                                 f'{value!r}')
        self.layout, self.impl = layout, impl
        if isinstance(freq_scaling, dict):
            freq_scaling = FrequencyScaling(**freq_scaling)
        if freq_scaling is not None and self.coords.frame != 'patch':
            raise ValueError(f'freq_scaling needs the patch coordinate frame,'
                             f' got frame={self.coords.frame!r} (a normalised'
                             ' frame keeps the extent of any grid)')
        self.freq_scaling = freq_scaling
        self._scale = 1.  # set by tables() for the grid being positioned

    def tables(self, coords, hw=None):
        """As :meth:`PositionScheme.tables`; in eval mode on an ``hw`` grid
        larger than ``freq_scaling``'s training grid the frequencies are
        rescaled."""
        scale = 1.
        if self.freq_scaling is not None and hw is not None and \
                not self.training:
            scale = self.freq_scaling.factor(hw)
        self._scale = scale
        try:
            return super().tables(coords, hw)
        finally:
            self._scale = 1.

    def frequencies(self, freqs: Tensor) -> Tensor:
        """``freqs`` as the current :meth:`tables` call rotates with."""
        if self._scale <= 1.:
            return freqs
        return self.freq_scaling.frequencies(freqs, self._scale)

    def table(self, angles: Tensor) -> RoPETable:
        """The :class:`RoPETable` of ``angles`` (magnitude: YaRN's
        temperature when scaling)."""
        magnitude = (1. if self._scale <= 1. else
                     self.freq_scaling.magnitude(self._scale))
        return RoPETable(angles, self.layout, self.impl, magnitude)

    def angles(self, index: int, coords: Tensor) -> Tensor:
        """``(n, heads | 1, M, D/2)`` angles of block ``index``."""
        raise NotImplementedError

    def block_table(self, index: int, coords: Tensor) -> RoPETable:
        # NaN coordinates (no position) -> angle 0
        return self.table(self.angles(index, coords.nan_to_num(0.)))


@POSITION_ENCODINGS.register_module(name='axial')
class AxialRoPE(LinearAngleRoPE):
    """RoPE-Axial (Eq. 12/13), fixed frequencies shared by heads and blocks.

    Args:
        theta: frequency base (default 100), or ``periods``: DINOv3's
            parametrisation (:func:`frequency_magnitudes`).
        axes: ``'xy'`` / ``'yx'`` (which half of the pairs rotates with
            ``x``); ``layout``, ``impl``, ``coords``, ``freq_scaling``:
            :class:`LinearAngleRoPE`.

    ``freqs``: ``(2, D/2)`` fp64 buffer (not saved); row 0 ``theta_x``.
    """
    shared = True

    def __init__(self, head_dim, num_heads, depth, theta=None, periods=None,
                 axes='xy', **kwargs):
        super().__init__(head_dim, num_heads, depth, **kwargs)
        if axes not in ROPE_AXES:
            raise ValueError(f'RoPE axes must be one of {ROPE_AXES}, got '
                             f'{axes!r}')
        if periods is not None and theta is not None:
            raise ValueError('periods replaces theta, got theta='
                             f'{theta}, periods={periods}')
        self.theta = None if periods else float(theta or 100.)
        self.periods, self.axes = (dict(periods) if periods else None), axes
        mag = frequency_magnitudes(head_dim, self.theta, self.periods)
        freqs = torch.stack((F.pad(mag, (0, mag.numel())),
                             F.pad(mag, (mag.numel(), 0))))
        self.register_buffer('freqs', freqs if axes == 'xy' else freqs.flip(0),
                             persistent=False)

    def angles(self, index, coords):
        # fp64 angles (exact to fp32 rounding at any coordinate), then cast
        return rope_angles(coords.double(),
                           self.frequencies(self.freqs.double())).to(
                               coords.dtype)


@POSITION_ENCODINGS.register_module(name='mixed')
class MixedRoPE(LinearAngleRoPE):
    """RoPE-Mixed (Eq. 14): learnable frequencies per block and head.

    Args:
        theta: base of the initial magnitudes (default 10).
        rotate_init: random direction per head at init (``False``: axial).
        axes, layout, impl, coords, freq_scaling: as :class:`AxialRoPE`.

    ``freqs.<i>``: block ``i``'s ``(2, heads, D/2)`` parameter (the
    backbone's ``get_layer_depth`` gives it block ``i``'s depth).
    """

    def __init__(self, head_dim, num_heads, depth, theta=None,
                 rotate_init=True, axes='xy', **kwargs):
        super().__init__(head_dim, num_heads, depth, **kwargs)
        if axes not in ROPE_AXES:
            raise ValueError(f'RoPE axes must be one of {ROPE_AXES}, got '
                             f'{axes!r}')
        self.theta, self.axes = float(theta or 10.), axes
        self.freqs = nn.ParameterList()
        for _ in range(depth):
            freqs = mixed_frequencies(head_dim, num_heads, self.theta,
                                      rotate=rotate_init)
            self.freqs.append(nn.Parameter(
                freqs if axes == 'xy' else freqs.flip(0).contiguous()))

    def angles(self, index, coords):
        return rope_angles(coords,
                           self.frequencies(self.freqs[index]).to(
                               coords.dtype))


@POSITION_ENCODINGS.register_module(name='dinov3')
class DINOv3RoPE(AxialRoPE):
    """DINOv3's RoPE (Simeoni et al. 2025): axial, periods ``base ** (t /
    (D/4))`` (``base=100``), axes ``(row, col)``, rotate-half layout,
    patch centres in ``[-1, 1]`` and in training its coordinate augmentation
    drawn as its ``DinoVisionTransformer`` draws it: per block, one draw per
    batch, ``rescale=2`` (its released models). ``coords`` entries given
    here replace those defaults one by one."""
    COORDS = dict(frame='separate', rescale=2., draw='per_block', per='batch')

    def __init__(self, head_dim, num_heads, depth, periods=dict(base=100.),
                 axes='yx', layout='half', coords=None, **kwargs):
        super().__init__(head_dim, num_heads, depth, periods=periods,
                         axes=axes, layout=layout,
                         coords={**self.COORDS, **(coords or {})}, **kwargs)


def rope_cfg_from_legacy(rope_type: str = 'mixed',
                         rope_theta: Optional[float] = None,
                         rope_periods: Optional[dict] = None,
                         rope_axes: str = 'xy', rope_layout: str = 'pairs',
                         rope_coords: Optional[dict] = None
                         ) -> Optional[dict]:
    """The ``rope=dict(...)`` of the old separate backbone arguments (the
    one translation of old configs; same model, same state dict):

    ========================  ===========================================
    old argument              ``rope=dict(...)``
    ========================  ===========================================
    ``rope_type='none'``      ``rope=None``
    ``rope_type=T``           ``type=T`` (``'axial'`` / ``'mixed'``)
    ``rope_theta=v``          ``theta=v`` (``None``: 100 axial, 10 mixed)
    ``rope_periods=p``        ``periods=p`` (axial only)
    ``rope_axes=a``           ``axes=a``
    ``rope_layout=l``         ``layout=l``
    ``rope_coords=c``         ``coords=c`` (frame, shift, jitter, rescale;
                              drawn per forward and per sample, as before)
    ========================  ===========================================
    """
    if rope_type == 'none':
        return None
    if rope_type not in ROPE_TYPES:
        raise ValueError(f'rope_type must be one of {ROPE_TYPES} or "none", '
                         f'got {rope_type!r}')
    cfg = dict(type=rope_type, theta=rope_theta, axes=rope_axes,
               layout=rope_layout, coords=rope_coords)
    if rope_periods is not None:
        if rope_type != 'axial':
            raise ValueError('rope_periods is for rope_type="axial" only, '
                             f'got {rope_type!r}')
        cfg['periods'] = rope_periods
    return cfg


def resolve_rope_cfg(rope, default, legacy: dict, owner: str):
    """``rope`` or, when old ``rope_*`` arguments ``legacy`` are given
    instead, :func:`rope_cfg_from_legacy` of them (``owner`` names the
    class in errors). An old argument set to ``None`` counts as not given:
    a config unsets an inherited ``rope_type`` that way when it switches to
    ``rope=dict(...)``."""
    legacy = {k: v for k, v in legacy.items() if v is not None}
    if not legacy:
        return rope
    unknown = sorted(set(legacy) - set(LEGACY_ROPE_ARGS))
    if unknown:
        raise TypeError(f'{owner}: unexpected argument(s) {unknown}')
    if rope is not default:
        spelled = {name[len('rope_'):]: value
                   for name, value in sorted(legacy.items())}
        new = 'rope=None' if spelled.get('type') == 'none' else \
            f'rope=dict({", ".join(f"{k}={v!r}" for k, v in spelled.items())})'
        raise ValueError(f'{owner}: give rope=dict(...) or the old '
                         f'{sorted(legacy)}, not both (the old ones read '
                         f'{new}; on the command line '
                         f'model.backbone.rope.<key>=...)')
    try:
        return rope_cfg_from_legacy(**legacy)
    except ValueError as err:
        raise ValueError(f'{owner}: {err}') from None
