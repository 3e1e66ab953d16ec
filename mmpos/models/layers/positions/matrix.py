"""Matrix RoPE: ``q -> R(r) q`` with ``R(r) = exp(x A_x + y A_y)`` for
learned skew-symmetric generators ``A_x, A_y`` (block-diagonal, ``b x b``
blocks, per block and head), so ``R(r)`` is orthogonal.

* **ComRoPE** (Yu et al., CVPR 2025): the generators commute, hence
  ``R(r_q)^T R(r_k) = R(r_k - r_q)`` and logits depend on the offset only.
  ComRoPE-LD: ``B_aj = s_aj (P_j - P_j^T)``; ComRoPE-AP: block ``j`` turns
  with axis ``j mod 2`` only, ``B_aj = P_j - P_j^T``. With ``b = 2`` LD is
  RoPE-Mixed and AP RoPE-Axial-like.
* **LieRE** (Ostmeier et al., 2024): unconstrained generators (strict upper
  triangles made skew); they need not commute, so logits are not exactly
  relative.

The ``x`` of a ``b``-block is channels ``b j .. b j + b - 1`` (for ``b =
2`` the ``'pairs'`` layout of :mod:`.linear`). Also the skew-symmetric and
Cayley maps that STRING (:class:`~.linear.STRINGRoPE`) uses.
"""
import math
from typing import Optional

import torch
import torch.nn as nn
from torch import Tensor

from .base import PositionScheme, PositionTable, per_window


def upper_skew(raw: Tensor) -> Tensor:
    """The skew-symmetric matrix ``U - U^T`` of ``raw``'s strict upper
    triangle ``U`` over the last two dims (LieRE's and STRING's
    parametrisation)."""
    upper = torch.triu(raw, diagonal=1)
    return upper - upper.transpose(-1, -2)


def cayley(s: Tensor) -> Tensor:
    """Cayley map ``(I - S)(I + S)^{-1}`` of skew-symmetric ``S`` ``(..., D,
    D)``: orthogonal, determinant 1; as the factors commute, ``solve(I + S,
    I - S)``."""
    eye = torch.eye(s.shape[-1], dtype=s.dtype, device=s.device)
    return torch.linalg.solve(eye + s, eye - s)


def comrope_generators(base: Tensor, scales: Optional[Tensor] = None
                       ) -> Tensor:
    """ComRoPE's generators ``(heads, 2, m, b, b)`` from ``P_j`` ``(heads,
    m, b, b)``: LD with ``scales`` ``s_aj`` ``(2, m)`` (block ``j`` of both
    axes is a multiple of one skew matrix, so they commute), else AP."""
    blocks = (base - base.transpose(-1, -2))[:, None]  # (heads, 1, m, b, b)
    if scales is not None:
        return blocks * scales[None, :, :, None, None]
    m = base.shape[1]
    owner = torch.arange(m, device=base.device) % 2
    mask = owner == torch.arange(2, device=base.device)[:, None]  # (2, m)
    return blocks * mask[None, :, :, None, None].to(blocks.dtype)


def block_rotations(coords: Tensor, generators: Tensor) -> Tensor:
    """``R(r) = exp(x A_x + y A_y)`` per token: coordinates ``(n, M, 2)``
    (``NaN``: the identity) and generators ``(heads, 2, m, b, b)`` ->
    ``(n, heads, M, m, b, b)`` blocks, in fp32 at least."""
    dtype = torch.promote_types(generators.dtype, torch.float32)
    xy = coords.nan_to_num(0.).to(dtype)
    gen = generators.to(dtype)
    # (n, 1, M, 1, 1, 1) * (heads, 1, m, b, b), summed over the two axes
    log_r = (xy[:, None, :, 0, None, None, None] * gen[:, 0, None] +
             xy[:, None, :, 1, None, None, None] * gen[:, 1, None])
    return torch.matrix_exp(log_r)


class BlockRotationTable(PositionTable):
    """Per-token block rotations ``(n, heads, M, m, b, b)``
    (:func:`block_rotations`); a matmul and reshapes, so also the export
    table."""

    def __init__(self, rotations: Tensor):
        self.rotations = rotations
        self.num_tokens = rotations.shape[-4]

    def rotate_patches(self, x: Tensor) -> Tensor:
        m, b = self.rotations.shape[-3], self.rotations.shape[-1]
        y = per_window(x, self.rotations.shape[0])
        y = y.to(self.rotations.dtype).unflatten(-1, (m, b))  # (.., M, m, b)
        # a broadcasting matmul (ONNX MatMul; the exporter crashed on einsum)
        out = torch.matmul(self.rotations, y.unsqueeze(-1)).squeeze(-1)
        return out.flatten(-2).to(x.dtype).reshape(x.shape)


class MatrixRoPE(PositionScheme):
    """Base of the matrix schemes: subclasses give block ``i``'s generators
    (:meth:`generators`); ``position_scale`` multiplies the positions
    first."""

    def __init__(self, head_dim, num_heads, depth, position_scale=1.,
                 coords=None):
        super().__init__(head_dim, num_heads, depth, coords)
        self.position_scale = float(position_scale)

    def generators(self, index: int) -> Tensor:
        """Block ``index``'s ``(heads, 2, m, b, b)`` skew generators."""
        raise NotImplementedError

    def block_table(self, index, coords, hw=None) -> BlockRotationTable:
        return BlockRotationTable(block_rotations(
            coords * self.position_scale, self.generators(index)))


class ComRoPE(MatrixRoPE):
    """ComRoPE (:func:`comrope_generators`), per block and head.

    Args:
        variant: ``'ld'`` (the paper's best) or ``'ap'``.
        block_size: ``b`` (``head_dim`` divisible by it; by ``2 b`` for
            ``'ap'``), 8.
        init_std: std of ``base``'s normal init (1; ``scales`` ``N(0, 1)``),
            as ComRoPE's code.
        position_scale: ComRoPE's code spans the training grid by ``[0,
            1]`` (patch centre ``(p + 0.5) / n``): ``1 / n`` in the patch
            frame; larger inputs extend beyond 1. Default 1.
        coords: :class:`~.base.PatchCoords` options.

    Parameters per block ``i`` (``m = D / b``): ``base.<i>`` ``(heads, m,
    b, b)``, ``scales.<i>`` ``(2, m)`` (LD).
    """

    def __init__(self, head_dim, num_heads, depth, variant='ld',
                 block_size=8, init_std=1., position_scale=1., coords=None):
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

    def generators(self, index):
        return comrope_generators(
            self.base[index],
            None if self.scales is None else self.scales[index])


class LieRE(MatrixRoPE):
    """LieRE: learned, unconstrained skew-symmetric generators (the strict
    upper triangles of ``generators_raw.<i>``, :func:`upper_skew`), per
    block and head.

    Args:
        block_size: ``b`` (LieRE's ``generator_dim``), 8.
        init_range: entries start ``U[0, init_range)`` (``2 pi``, as LieRE's
            code).
        position_scale: LieRE's code spans ``[0, 1]`` from the first to the
            last patch: ``1 / (n - 1)`` in the patch frame. Default 1.
        coords: :class:`~.base.PatchCoords` options.

    Parameters per block ``i``: ``generators_raw.<i>`` ``(heads, 2, m, b,
    b)``.
    """

    def __init__(self, head_dim, num_heads, depth, block_size=8,
                 init_range=2 * math.pi, position_scale=1., coords=None):
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

    def generators(self, index):
        return upper_skew(self.generators_raw[index])
