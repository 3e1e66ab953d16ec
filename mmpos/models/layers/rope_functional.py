"""2-D rotary position embedding (RoPE): the functions (frequencies, angles,
tables, rotations) on continuous token coordinates.

Implements RoPE-Axial and RoPE-Mixed of Heo et al., "Rotary Position
Embedding for Vision Transformer" (ECCV 2024), and the fixed 2-D sin-cos
absolute embedding of its Eq. 2.

Conventions used throughout the suite:

* **Coordinates** are ``(x, y)`` in patch units, ``x`` = column and
  ``y`` = row, as floats. A ``(N, 2)`` tensor is shared by the batch, a
  ``(B, N, 2)`` tensor gives every sample its own positions. Any real value is
  allowed (fractional, negative, beyond the training grid). :func:`grid_coords`
  returns the integer grid in the row-major token order of ``PatchEmbed``.
* **Channel layout.** A head vector of ``D`` channels is read as ``D/2``
  complex numbers with channel ``2t`` the real and ``2t+1`` the imaginary part
  (Sec. 3.1). Complex pair ``t`` is rotated by the angle
  ``theta_x[t] * x + theta_y[t] * y`` (Eq. 14). RoPE-Axial is the special case
  where the first ``D/4`` pairs have ``theta_y = 0`` and the last ``D/4`` pairs
  ``theta_x = 0``, both using the frequencies of Eq. 13. (Eq. 12 interleaves
  x- and y-pairs instead; that is the same operator up to a fixed permutation
  of the head channels. The split layout is the one of the authors' code and
  makes RoPE-Mixed at rotation angle 0 *equal* to RoPE-Axial.)
* **Prefix tokens.** Coordinates are given for the *last* ``M`` tokens only;
  the leading ``N - M`` tokens of ``q``/``k`` (class token, register tokens)
  get angle 0, i.e. no rotation, as the class token in the paper. Their
  logits against patch keys therefore depend on the patches' absolute
  coordinates; only patch-patch logits are shift invariant (Eq. 15).
  A ``NaN`` coordinate marks a token without position: it gets angle 0
  too (DropPos' dropped positions; ``NaN`` survives the coordinate frames
  and augmentation of :mod:`.position`, where a sentinel value would
  be moved).

Options for other RoPE families (all off by default):

* **Frequencies** (:func:`frequency_magnitudes`): ``theta`` as above
  (radians per patch, Eq. 13), or DINOv3's period parametrisation: period
  ``p_t`` = ``base ** (t / (D/4))`` or geometric from ``min_period`` to
  ``max_period``, frequency ``2 pi / p_t``.
* **Axis order** ``axes``: ``'xy'`` (above) or ``'yx'``: the first ``D/4``
  pairs rotate with ``y`` (DINOv3, whose coordinates are ``(row, col)``).
* **Channel layout** ``layout``: ``'pairs'`` (above) or ``'half'``: pair
  ``t`` is channels ``(t, t + D/2)`` (the "rotate-half" layout of DINOv3,
  GPT-NeoX, timm's ``rotate_half=True``). Weights trained with one layout
  need that layout (the two differ by a fixed permutation of the q/k
  channels).
* **Test-time frequency scaling** (:func:`scale_frequencies`) for grids
  larger than the training grid: position interpolation, NTK-aware and
  YaRN's NTK-by-parts with its attention temperature
  (:func:`yarn_attention_factor`).

Torch only (no OpenMMLab import), so ``benchmarks/rope_attention_device.py``
loads it by path. The schemes that use these functions are in :mod:`.rope`.
"""
import math
from typing import Optional, Tuple

import torch
from torch import Tensor

def grid_coords(h: int, w: int, device=None,
                dtype: torch.dtype = torch.float32) -> Tensor:
    """Integer patch-grid coordinates, shape ``(h * w, 2)`` as ``(x, y)``.

    Row-major order (``y`` outer, ``x`` inner), i.e. the order of the tokens
    produced by ``PatchEmbed`` for an ``(h, w)`` patch grid. 0-based.
    """
    ys, xs = torch.meshgrid(
        torch.arange(h, device=device, dtype=dtype),
        torch.arange(w, device=device, dtype=dtype),
        indexing='ij')
    return torch.stack((xs.flatten(), ys.flatten()), dim=-1)


def _magnitudes(head_dim: int, theta: float) -> Tensor:
    """``theta ** (-t / (D/4))`` for ``t = 0 .. D/4 - 1`` (Eq. 13)."""
    if head_dim % 4:
        raise ValueError('2-D position encodings need a dimension divisible '
                         f'by 4, got {head_dim}')
    quarter = head_dim // 4
    return theta**(-torch.arange(quarter, dtype=torch.float64) / quarter)


def frequency_magnitudes(head_dim: int,
                         theta: Optional[float] = None,
                         periods: Optional[dict] = None) -> Tensor:
    """The ``D/4`` frequency magnitudes of one axis, fp64, shape ``(D/4,)``.

    Args:
        theta: ``theta ** (-t / (D/4))`` radians per coordinate unit
            (Eq. 13; today's parametrisation).
        periods: DINOv3's instead: ``dict(base=b)`` gives periods
            ``b ** (t / (D/4))``, ``dict(min_period=a, max_period=b)``
            periods geometric from ``a`` to ``b`` (both ends included); the
            magnitude is ``2 pi / period``.

    Exactly one of ``theta`` and ``periods`` must be given.
    """
    if (theta is None) == (periods is None):
        raise ValueError('give either theta or periods, got theta='
                         f'{theta}, periods={periods}')
    if periods is None:
        return _magnitudes(head_dim, theta)
    quarter = _magnitudes(head_dim, 1.).numel()
    keys = set(periods)
    if keys == {'base'}:
        p = periods['base']**(torch.arange(quarter, dtype=torch.float64) /
                              quarter)
    elif keys == {'min_period', 'max_period'}:
        lo, hi = float(periods['min_period']), float(periods['max_period'])
        if not 0 < lo <= hi:
            raise ValueError('periods need 0 < min_period <= max_period, '
                             f'got {periods}')
        p = lo * (hi / lo)**torch.linspace(0, 1, quarter,
                                           dtype=torch.float64)
    else:
        raise ValueError("periods must be dict(base=...) or dict(min_period="
                         f"..., max_period=...), got {periods}")
    return 2 * math.pi / p


def axial_frequencies(head_dim: int,
                      theta: Optional[float] = 100.0,
                      periods: Optional[dict] = None,
                      axes: str = 'xy') -> Tensor:
    """Fixed RoPE-Axial frequencies (Eq. 12/13), shape ``(2, D/2)``.

    Row 0 holds ``theta_x``, row 1 ``theta_y``: with ``axes='xy'`` pairs
    ``t < D/4`` rotate with ``x`` only and pairs ``t >= D/4`` with ``y``
    only; ``axes='yx'`` swaps the halves. Magnitudes from
    :func:`frequency_magnitudes` (``theta`` unless ``periods``).
    """
    mag = frequency_magnitudes(head_dim, None if periods else theta,
                               periods)
    zero = torch.zeros_like(mag)
    freqs = torch.stack((torch.cat((mag, zero)), torch.cat((zero, mag))))
    return (freqs if axes == 'xy' else freqs.flip(0)).float()


def mixed_frequencies(head_dim: int,
                      num_heads: int,
                      theta: float = 10.0,
                      rotate: bool = True) -> Tensor:
    """Initial RoPE-Mixed frequencies (Eq. 14), shape ``(2, num_heads, D/2)``.

    Per head a direction ``phi ~ U[0, 2 pi)`` is drawn (``phi = 0`` when
    ``rotate=False``). Pair ``t < D/4`` gets the 2-D frequency
    ``m_t (cos phi, sin phi)``, pair ``t + D/4`` the orthogonal
    ``m_t (-sin phi, cos phi)``, with ``m_t = theta ** (-t / (D/4))``. With
    ``rotate=False`` this equals :func:`axial_frequencies` for every head.
    """
    mag = _magnitudes(head_dim, theta)
    if rotate:
        phi = torch.rand(num_heads, 1, dtype=torch.float64) * (2 * math.pi)
    else:
        phi = torch.zeros(num_heads, 1, dtype=torch.float64)
    cos, sin = torch.cos(phi) * mag, torch.sin(phi) * mag
    freqs_x = torch.cat((cos, -sin), dim=-1)
    freqs_y = torch.cat((sin, cos), dim=-1)
    return torch.stack((freqs_x, freqs_y)).float()


def rope_angles(coords: Tensor, freqs: Tensor) -> Tensor:
    """Rotation angles ``theta_x * x + theta_y * y`` (Eq. 14).

    Args:
        coords: ``(N, 2)`` or ``(B, N, 2)`` positions ``(x, y)``.
        freqs: ``(2, K)`` shared by all heads or ``(2, heads, K)``; row 0 is
            ``theta_x``, row 1 ``theta_y``.

    Returns:
        ``(heads | 1, N, K)`` or ``(B, heads | 1, N, K)``, broadcastable
        against ``(B, heads, N, K)``. Elementwise ops only, so autocast keeps
        the dtype of ``coords`` and ``freqs``.
    """
    if freqs.dim() == 2:
        freqs = freqs.unsqueeze(1)
    xy = coords.unsqueeze(-3)  # (..., 1, N, 2)
    return torch.addcmul(xy[..., 0:1] * freqs[0].unsqueeze(-2), xy[..., 1:2],
                         freqs[1].unsqueeze(-2))


def rope_tables(coords: Tensor,
                freqs: Tensor,
                layout: str = 'pairs') -> Tuple[Tensor, Tensor]:
    """Per-channel cos/sin tables for :func:`apply_rope`.

    With ``a_t`` the angle of pair ``t`` (:func:`rope_angles` of
    ``freqs`` of shape ``(2, [heads,] D/2)``), the two channels of pair
    ``t`` (``2t, 2t+1`` for ``layout='pairs'``, ``t, t + D/2`` for
    ``'half'``) both hold ``cos(a_t)`` in the ``cos`` table and ``-sin(a_t)``
    (real part) and ``+sin(a_t)`` (imaginary part) in the ``sin`` table.
    Both are computed at once from the angles ``-a_t, +a_t`` (cos is even).
    Shapes as :func:`rope_angles` with ``K = D``.
    """
    if layout == 'pairs':
        signed = torch.stack((-freqs, freqs), dim=-1).flatten(-2)
    else:
        signed = torch.cat((-freqs, freqs), dim=-1)
    angles = rope_angles(coords, signed)
    return angles.cos(), angles.sin()


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor,
               layout: str = 'pairs') -> Tensor:
    """Rotate the channel pairs of ``x`` (Eq. 11).

    For pair ``(r, i)`` (``(2t, 2t+1)`` with ``layout='pairs'``,
    ``(t, t + D/2)`` with ``'half'``): ``out[r] = x[r] cos a_t - x[i] sin
    a_t`` and ``out[i] = x[i] cos a_t + x[r] sin a_t``, the complex product
    ``x_bar * exp(i a_t)`` written with real tensors, as
    ``x * cos + swap(x) * sin`` with the tables of :func:`rope_tables`
    (``swap`` exchanges the two channels of every pair). Runs in
    ``cos.dtype`` (fp32 for fp16/bf16 inputs) and returns ``x.dtype``.

    Args:
        x: ``(..., N, D)``, e.g. queries and keys stacked as
            ``(2, B, heads, N, D)``.
        cos, sin: ``(..., N, D)`` tables broadcastable against ``x``.
    """
    y = x.to(cos.dtype)
    if layout == 'pairs':
        # strided slices, not flip: exporters (ONNX -> TensorRT) take them
        swapped = torch.stack((y[..., 1::2], y[..., 0::2]),
                              dim=-1).flatten(-2)
    else:
        half = y.shape[-1] // 2
        swapped = torch.cat((y[..., half:], y[..., :half]), dim=-1)
    return torch.addcmul(y * cos, swapped, sin).to(x.dtype)


def rope_phasors(coords: Tensor, freqs: Tensor) -> Tensor:
    """Half-width rotation table ``exp(i a_t)`` for :func:`apply_rope_phasors`.

    ``a_t`` is the angle of pair ``t`` (:func:`rope_angles` of ``freqs`` of
    shape ``(2, [heads,] D/2)``); complex, shape ``(heads | 1, N, D/2)`` or
    ``(B, heads | 1, N, D/2)``, one entry per pair instead of the two
    full-width real tables of :func:`rope_tables`.
    """
    angles = rope_angles(coords, freqs)
    return torch.polar(torch.ones_like(angles), angles)


def _complex_view(y: Tensor) -> Tensor:
    """``y`` ``(..., D)`` as ``(..., D/2)`` complex pairs ``(2t, 2t+1)``; a
    view when the strides allow it, else of a contiguous copy (always in a
    compiled graph, where the compiler picks the layout and fuses it)."""
    pairs = y.unflatten(-1, (y.shape[-1] // 2, 2))
    if torch.compiler.is_compiling() or pairs.storage_offset() % 2 or any(
            st % 2 for st in pairs.stride()[:-1]):
        pairs = pairs.contiguous()
    return torch.view_as_complex(pairs)


def apply_rope_phasors(x: Tensor, phasors: Tensor,
                       layout: str = 'pairs') -> Tensor:
    """Rotate the channel pairs of ``x`` by ``phasors`` (Eq. 11), the fast
    path of :func:`apply_rope`.

    Pair ``t`` of ``x`` (channels ``(2t, 2t+1)`` for ``layout='pairs'``,
    ``(t, t + D/2)`` for ``'half'``) is read as the complex number
    ``x[r] + i x[i]`` and multiplied by ``phasors[t]`` = ``exp(i a_t)``: one
    complex product per pair. With ``'pairs'`` the input is viewed as
    complex (no copy in fp32), with ``'half'`` the halves are joined. Runs
    in the real dtype of ``phasors`` (fp32 for fp16/bf16 inputs) and
    returns ``x.dtype``.

    Args:
        x: ``(..., N, D)``, e.g. queries and keys stacked as
            ``(2, B, heads, N, D)``.
        phasors: ``(..., N, D/2)`` complex (:func:`rope_phasors`),
            broadcastable against ``x``.
    """
    y = x.to(phasors.real.dtype)
    if layout == 'pairs':
        out = torch.view_as_real(_complex_view(y) * phasors).flatten(-2)
    else:
        re, im = y.chunk(2, dim=-1)
        rotated = torch.complex(re, im) * phasors
        out = torch.cat((rotated.real, rotated.imag), dim=-1)
    return out.to(x.dtype)


FREQ_SCALINGS = ('pi', 'ntk', 'yarn')


def scale_frequencies(freqs: Tensor,
                      scale: float,
                      method: str = 'ntk',
                      train_extent: Optional[float] = None,
                      alpha: float = 1.,
                      beta: float = 32.) -> Tensor:
    """2-D RoPE frequencies rescaled for a grid ``scale`` times larger than
    the training grid (test-time extrapolation).

    ``freqs``: ``(2, [heads,] K)``, the frequency vectors ``f_t`` (row 0
    ``x``, row 1 ``y``) of the ``K`` pairs; each is scaled as a whole, so a
    pair keeps its direction. With ``|f|`` the magnitudes (per head):

    * ``'pi'`` (position interpolation): ``f / s`` (the larger grid is
      squeezed into the training range of angles).
    * ``'ntk'`` (NTK-aware): ``f s ** (-g)``, ``g = log(|f|_max / |f|) /
      log(|f|_max / |f|_min)``: the highest frequency is kept, the lowest
      divided by ``s``; for RoPE-Axial's geometric frequencies this is the
      base change ``theta -> theta s ** (n / (n - 1))`` (``n = D/4``).
    * ``'yarn'`` (YaRN's "NTK-by-parts" frequencies): with wavelength ``2 pi
      / |f|`` and ``r = train_extent / wavelength``, ``g = clip((r - alpha)
      / (beta - alpha), 0, 1)`` and ``f ((1 - g) / s + g)``: pairs turning
      less than ``alpha`` times over the training grid are interpolated,
      those turning more than ``beta`` times kept (YaRN's attention
      temperature: :func:`yarn_attention_factor`).

    ``scale <= 1`` returns ``freqs``.
    """
    if method not in FREQ_SCALINGS:
        raise ValueError(f'frequency scaling must be one of {FREQ_SCALINGS}'
                         f', got {method!r}')
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


def yarn_attention_factor(scale: float) -> float:
    """YaRN's temperature as a factor on queries and keys: ``sqrt(1 / t) =
    0.1 ln(s) + 1`` (YaRN, Peng et al. 2023), so the logits grow by ``1 /
    t``; 1 for ``s <= 1``. Its reference implementation folds the factor
    into the cos / sin tables, as :class:`~.rope.RoPETable` does."""
    return 1. if scale <= 1. else 0.1 * math.log(scale) + 1.


def sincos_pos_embed_2d(coords: Tensor,
                        embed_dims: int,
                        temperature: float = 10000.) -> Tensor:
    """Fixed 2-D sin-cos absolute position embedding (Eq. 2).

    Channel ``4t .. 4t+3`` hold ``sin(x w_t), cos(x w_t), sin(y w_t),
    cos(y w_t)`` with ``w_t = temperature ** (-t / (C/4))``.

    Args:
        coords: ``(..., N, 2)`` positions ``(x, y)``.
        embed_dims: ``C``, a multiple of 4.

    Returns:
        ``(..., N, C)`` in fp32.
    """
    omega = _magnitudes(embed_dims, temperature).to(coords.device,
                                                    torch.float32)
    x = coords[..., 0:1].float() * omega
    y = coords[..., 1:2].float() * omega
    return torch.stack((x.sin(), x.cos(), y.sin(), y.cos()),
                       dim=-1).flatten(-2)
