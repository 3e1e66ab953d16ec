"""Matrix RoPE: ``q -> R(r) q`` with ``R(r) = exp(x A_x + y A_y)`` for
learned skew-symmetric generators ``A_x, A_y`` (block-diagonal, ``b x b``
blocks over channels ``b j .. b j + b - 1``, per block and head), so ``R(r)``
is orthogonal.

* **ComRoPE** (Yu et al., CVPR 2025): commuting generators (block ``j``
  of both axes a multiple of one ``S_j = O_j J_j O_j^T``), so ``R(r_q)^T
  R(r_k) = R(r_k - r_q)`` and ``R(r) = O RoPE(r) O^T``: RoPE-Mixed after
  ``O^T`` on every token (:class:`~.linear.BasisRoPETable`).
* **LieRE** (Ostmeier et al., 2024): unconstrained generators, not
  commuting: one ``b x b`` exponential per token, block and head
  (:func:`block_rotations`, :func:`exp_at_points`).
"""
import math
from typing import Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from .base import PositionScheme, PositionTable, check_choice
from .linear import BasisRoPETable, RoPETable, rope_angles, upper_skew

# squarings of :func:`exp_at_points` while compiling (a static loop, each
# step kept only where needed): spectral norms up to max_norm * 2^16
MAX_SQUARINGS = 16


def skew_eigenbasis(skew: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """Real Schur form ``S = O J O^T`` of skew-symmetric ``S`` ``(..., b,
    b)``, ``J`` turning pair ``(2a, 2a + 1)`` at rate ``w_a >= 0``, so
    ``exp(t S) x = O RoPE(t w) O^T x``: ``O`` ``(..., b, b)``, ``w`` ``(...,
    b/2)`` in fp64 from the Hermitian ``i S``'s eigenvectors ``u_a`` of
    ``+w_a`` (pair ``a`` of ``O``: ``sqrt(2) (Re u_a, Im u_a)``), and the
    smallest gap of neighbouring eigenvalues relative to ``max(1, |w|)``
    (``O`` is undefined where it is 0: rates that meet)."""
    b = skew.shape[-1]
    lam, vec = torch.linalg.eigh(1j * skew.to(torch.complex128))
    top = vec[..., b // 2:]  # (..., b, b/2): eigenvalues +w_a
    basis = torch.stack((top.real, top.imag), dim=-1).flatten(-2)
    scale = lam.abs().amax(-1, keepdim=True).clamp_min(1.)
    gap = (lam.diff(dim=-1) / scale).amin()
    return basis * math.sqrt(2.), lam[..., b // 2:], gap


def block_diagonal(blocks: Tensor) -> Tensor:
    """``(..., m, b, b)`` -> the block-diagonal ``(..., m b, m b)``."""
    m, b = blocks.shape[-3], blocks.shape[-1]
    dense = torch.diag_embed(blocks.movedim(-3, -1), dim1=-4, dim2=-2)
    return dense.reshape(*blocks.shape[:-3], m * b, m * b)


def _products(a: Tensor, b: Tensor, out: Optional[Tensor] = None
              ) -> Tensor:
    """``a @ b`` (plus ``out``) of batch-last matrices: ``(i, k, K)`` x
    ``(k, j, K)`` -> ``(i, j, K)`` by ``k`` multiply-adds (for many small
    blocks faster on CPU than ``bmm``'s BLAS call per matrix)."""
    start = 0
    if out is None:
        out, start = a[:, 0, None] * b[None, 0], 1
    for k in range(start, a.shape[1]):
        out.addcmul_(a[:, k, None], b[None, k])
    return out


def _kept(new: Tensor, old: Tensor, steps: Tensor, j: int,
          masked: bool) -> Tensor:
    """Step ``j``'s ``new`` where ``steps > j`` (``masked``), else ``old``."""
    return torch.where(steps > j, new, old) if masked else new


class _Squarings(torch.autograd.Function):
    """``M^(2^s)`` of batch-last ``(b, b, K)`` ``M`` by ``count`` squarings
    (step ``j`` kept where ``steps > j`` if ``masked``). Saves ``M`` only:
    the adjoint of ``G`` is ``X_s``, ``X_0 = G``, ``X_{j+1} = X_j N_j + N_j
    X_j``, ``N_j = (M^T)^(2^j)`` squared again."""

    @staticmethod
    def forward(ctx, m: Tensor, steps: Tensor, count: int,
                masked: bool) -> Tensor:
        ctx.save_for_backward(m, steps)
        ctx.count, ctx.masked = count, masked
        for j in range(count):
            m = _kept(_products(m, m), m, steps, j, ctx.masked)
        return m

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor):
        m, steps = ctx.saved_tensors
        power, adj = m.transpose(0, 1), grad.contiguous()  # N_0, X_0
        for j in range(ctx.count):
            adj = _kept(_products(power, adj, _products(adj, power)), adj,
                        steps, j, ctx.masked)
            if j + 1 < ctx.count:
                power = _kept(_products(power, power), power, steps, j + 1,
                              ctx.masked)
        return adj, None, None, None


def exp_at_points(points: Tensor, generators: Tensor,
                  max_norm: float = 2.) -> Tensor:
    """``exp(x A + y B)`` at ``N`` points ``(x, y)`` ``(N, 2)`` of ``P``
    generator pairs ``(2, P, b, b)`` -> ``(N, P, b, b)``, equal to
    ``torch.matrix_exp`` per point within rounding (values, gradients).

    Scaling and squaring (Higham, SIAM J. Matrix Anal. Appl. 26(4), 2005),
    Taylor terms shared by the points: with each axis scaled into ``[-1,
    1]`` by a power of two, ``A' = A / 2^s``, ``B' = B / 2^s`` (``s`` the
    least making ``|x| ||A'||_2 + |y| ||B'||_2 <= max_norm``), ``exp(x A' +
    y B') = sum_k sum_{i+j=k} x^i y^j C_ij / k!`` with ``C_ij = A' C_{i-1,j}
    + B' C_{i,j-1}`` computed once, then ``s`` per-point squarings
    (:class:`_Squarings`; compiling: :data:`MAX_SQUARINGS` masked steps).
    Degree: the least whose next term bound ``theta^(K+1) / (K+1)!`` is
    below ``eps / 2`` (``theta``: the largest scaled bound, or
    ``max_norm``).
    """
    b = generators.shape[-1]
    with torch.no_grad():
        # (2,): a power of two >= each axis' largest |coordinate|
        span = torch.exp2(torch.ceil(torch.log2(
            points.abs().amax(0).clamp_min(2.**-60))))
        unit = points / span  # (N, 2) in [-1, 1]
        # (2, P) spectral norms
        norms = torch.linalg.matrix_norm(generators, ord=2) * span[:, None]
        bound = (unit.abs() @ norms).amax()
        steps = torch.ceil(torch.log2(bound / max_norm)).clamp_min(0)
    # dynamo cannot trace a data-dependent loop: compiled, a static one
    compiling = torch.compiler.is_compiling()
    # eager: the squarings and the largest scaled bound, in one sync
    count, theta = ((MAX_SQUARINGS, max_norm) if compiling else
                    torch.stack((steps, bound * torch.exp2(-steps))).tolist())
    tol = torch.finfo(generators.dtype).eps / 2
    degree = next(k for k in range(1, 100)
                  if theta**(k + 1) / math.factorial(k + 1) < tol)
    a, c = generators * (span * torch.exp2(-steps))[:, None, None, None]
    # level k: the (k + 1) C_ij / k! of i + j = k side by side, i = 0..k;
    # block i of level k is (C' block i + A' block i - 1) / k of level k - 1
    ca = torch.cat([c, a], -1)  # (P, b, 2 b)
    level = torch.eye(b, dtype=a.dtype, device=a.device).expand_as(a)
    levels = [level]
    for k in range(1, degree + 1):
        shifted = torch.cat([F.pad(level, (0, b)), F.pad(level, (b, 0))], -2)
        level = (ca / k) @ shifted  # (P, b, 2 b) @ (P, 2 b, (k + 1) b)
        levels.append(level)
    terms = torch.cat(levels, -1).unflatten(-1, (-1, b))  # (P, b, T, b)
    i = torch.cat([torch.arange(k + 1) for k in range(degree + 1)])
    k = torch.cat([torch.full((k + 1, ), k) for k in range(degree + 1)])
    powers = (unit[:, :1]**i.to(unit) *
              unit[:, 1:]**(k - i).to(unit))  # (N, T): x^i y^j
    flat = terms.permute(2, 0, 1, 3).flatten(1)  # (T, P b b)
    # (N P, b b) -> (b, b, N P): batch-last (a 2-d transpose, as below)
    out = (powers @ flat).view(-1, b * b).T.contiguous().view(b, b, -1)
    out = _Squarings.apply(out, steps, int(count), compiling)
    # (b b, N P) -> (N, P, b, b)
    return out.view(b * b, -1).T.contiguous().view(len(points), -1, b, b)


def block_rotations(coords: Tensor, generators: Tensor) -> Tensor:
    """``R(r) = exp(x A_x + y A_y)`` per token: coordinates ``(n, M, 2)``
    (``NaN``: identity), generators ``(heads, 2, m, b, b)`` -> ``(n, heads,
    M, m, b, b)`` blocks, fp32 at least."""
    dtype = torch.promote_types(generators.dtype, torch.float32)
    xy = coords.nan_to_num(0.).to(dtype)
    heads, _, m, b = generators.shape[:4]
    n, num = xy.shape[:2]
    pairs = generators.to(dtype).transpose(0, 1).reshape(2, heads * m, b, b)
    rot = exp_at_points(xy.reshape(n * num, 2), pairs)  # (n M, heads m, b, b)
    return rot.view(n, num, heads, m, b, b).transpose(1, 2)


class BlockRotationTable(PositionTable):
    """Per-token block rotations ``(n, heads, M, m, b, b)``, applied as one
    batched product with the batch's queries and keys as the columns of
    each block (matmuls and reshapes: its own export table)."""

    def __init__(self, rotations: Tensor):
        self.rotations = rotations
        self.num_tokens = rotations.shape[-4]

    def rotate_patches(self, x: Tensor) -> Tensor:
        n, heads, M, m, b = self.rotations.shape[:-1]
        # (L, n, heads, M, m, b) -> (n, heads, M, m, b, L): L columns a block
        y = x.to(self.rotations.dtype).reshape(-1, n, heads, M, m, b)
        out = torch.matmul(self.rotations, y.permute(1, 2, 3, 4, 5, 0))
        return out.permute(5, 0, 1, 2, 3, 4).to(x.dtype).reshape(x.shape)


class MatrixRoPE(PositionScheme):
    """Base of the matrix schemes: block ``i``'s :meth:`generators` of
    ``b = block_size`` blocks (``head_dim`` a multiple of ``step``) at the
    positions times ``position_scale``, per token."""
    OPTIONS = ('block_size', 'position_scale')

    def __init__(self, head_dim, num_heads, depth, block_size,
                 position_scale, coords, step):
        super().__init__(head_dim, num_heads, depth, coords)
        if head_dim % step:
            raise ValueError(f'{type(self).__name__} needs head_dim '
                             f'divisible by {step}, got {head_dim}')
        self.block_size = block_size
        self.position_scale = float(position_scale)

    def generators(self, index: int) -> Tensor:
        """Block ``index``'s ``(heads, 2, m, b, b)`` skew generators."""
        raise NotImplementedError

    def block_table(self, index, coords, hw=None) -> PositionTable:
        return BlockRotationTable(block_rotations(
            coords * self.position_scale, self.generators(index)))


class ComRoPE(MatrixRoPE):
    """ComRoPE ``variant`` ``'ld'`` (the paper's best) or ``'ap'`` with
    ``b = block_size`` (8; ``head_dim`` divisible by ``b``, ``2 b`` for AP).
    Parameters per block ``i`` (``m = D / b``): ``base.<i>`` ``(heads, m, b,
    b)`` ``~ N(0, init_std^2)`` and, for LD, ``scales.<i>`` ``(2, m) ~ N(0,
    1)``, as ComRoPE's code (which spans the training grid by ``[0, 1]``:
    ``position_scale = 1 / n`` in the patch frame; default 1)."""
    OPTIONS = ('variant', 'block_size', 'position_scale')

    def __init__(self, head_dim, num_heads, depth, variant='ld',
                 block_size=8, init_std=1., position_scale=1., coords=None):
        check_choice('ComRoPE variant', variant, ('ld', 'ap'))
        super().__init__(head_dim, num_heads, depth, block_size,
                         position_scale, coords,
                         block_size * (2 if variant == 'ap' else 1))
        self.variant, m = variant, head_dim // block_size
        self.base = nn.ParameterList(
            nn.Parameter(torch.randn(num_heads, m, block_size, block_size) *
                         init_std) for _ in range(depth))
        self.scales = nn.ParameterList(
            nn.Parameter(torch.randn(2, m))
            for _ in range(depth)) if variant == 'ld' else None

    def blocks(self, index: int) -> Tuple[Tensor, Tensor]:
        """Block ``index``'s skews ``S_j = P_j - P_j^T`` ``(heads, m, b,
        b)`` and axis coefficients ``c`` ``(2, m)`` (generator block ``j``
        of axis ``a``: ``c_aj S_j``): ``s`` (LD) or ``[j mod 2 = a]``."""
        base = self.base[index]
        skew = base - base.transpose(-1, -2)
        if self.scales is not None:
            return skew, self.scales[index]
        owner = torch.arange(base.shape[1], device=base.device) % 2
        mask = owner == torch.arange(2, device=base.device)[:, None]  # (2, m)
        return skew, mask.to(skew.dtype)

    def generators(self, index):
        skew, coef = self.blocks(index)
        return skew[:, None] * coef[None, :, :, None, None]

    def block_table(self, index, coords, hw=None) -> PositionTable:
        """``O RoPE(r) O^T`` (:func:`skew_eigenbasis`), pair ``a`` of block
        ``j`` turning by ``(c_j . r) w_ja``; where two rates meet (no
        eigenbasis; not checked while compiling), :class:`MatrixRoPE`'s."""
        skew, coef = self.blocks(index)
        basis, rates, gap = skew_eigenbasis(skew)
        # dynamo cannot branch on a tensor's value: compiled, no fallback
        if not torch.compiler.is_compiling() and gap <= 1e-6:
            return super().block_table(index, coords, hw)
        dtype = torch.promote_types(skew.dtype, torch.float32)
        # (2, 1, m, 1) * (heads, m, b/2) -> (2, heads, D/2): pair (j, a)
        freqs = (coef[:, None, :, None].double() * rates).flatten(-2)
        xy = (coords.double() * self.position_scale).nan_to_num(0.)
        angles = rope_angles(xy, freqs).to(dtype)  # (n, heads, M, D/2)
        return BasisRoPETable(
            RoPETable(angles),
            block_diagonal(basis).transpose(-1, -2).to(dtype))


class LieRE(MatrixRoPE):
    """LieRE: generators :func:`upper_skew` of ``generators_raw.<i>``
    ``(heads, 2, m, b, b)`` per block, ``b = block_size`` (LieRE's
    ``generator_dim``, 8), entries ``U[0, init_range)`` at init (``2 pi``)
    as LieRE's code (which spans ``[0, 1]`` from the first to the last
    patch: ``position_scale = 1 / (n - 1)`` in the patch frame; default
    1)."""

    def __init__(self, head_dim, num_heads, depth, block_size=8,
                 init_range=2 * math.pi, position_scale=1., coords=None):
        super().__init__(head_dim, num_heads, depth, block_size,
                         position_scale, coords, block_size)
        self.generators_raw = nn.ParameterList(
            nn.Parameter(torch.rand(num_heads, 2, head_dim // block_size,
                                    block_size, block_size) * init_range)
            for _ in range(depth))

    def generators(self, index):
        return upper_skew(self.generators_raw[index])
