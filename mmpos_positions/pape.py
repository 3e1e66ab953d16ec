"""PaPE and PaPE-RI (Ohrstrom et al., "Where to Attend: A Principled
Vision-Centric Position Encoding with Parabolas", arXiv 2602.01418): no
rotation; query ``i`` adds to its logit with key ``j`` a sum of parabolas
in their relative position, opened by the query's own content:

* PaPE: ``sum_p -a_ip (u_ip - u_jp)^2 + b_ip (u_ip - u_jp)`` with ``u_i =
  W_u r_i`` (``P`` learned projections of the position per head, no bias)
  and ``a_i = softplus(W_a x_i)``, ``b_i = W_b x_i`` read from the query
  token ``x_i`` (the block's normed input): translation invariant, with
  distance decay (``a > 0``) and direction (``b``);
* PaPE-RI: ``-a_i s_h^2 |r_i - r_j|^2``, ``a_i = softplus(w_a . x_i)`` per
  head and a fixed scale ``s_h ~ U(-1/sqrt(2), 1/sqrt(2))`` per head and
  block (a buffer, as the authors'): rotation invariant as well.

The authors append these terms to the queries and keys as extra channels
(``pape/nn/positions/pape.py``, ``pape_ri.py`` of DTU-PAS/
parabolic-position-encoding); the logit is the same bilinear form, here the
additive bias ``(n, heads, M, M)`` of the patch tokens, scaled by the
attention's ``1 / sqrt(D)`` as theirs is. Prefix tokens (class, registers)
and tokens without position get no bias (the authors' class token sits at
position ``(0, 0)`` instead). The bias reads the tokens, so the tables are
:class:`~.tokens.TokenTable` (the attention binds them).
"""
import math
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from .base import (BiasTable, PositionScheme, full_precision,
                   tile_windows)
from .tokens import TokenTable


def _linear_init(rows: int, cols: int) -> Tensor:
    """An ``(rows, cols)`` weight initialised as ``nn.Linear``'s (the
    authors' projections are ``nn.Linear(cols, rows, bias=False)``)."""
    weight = torch.empty(rows, cols)
    nn.init.kaiming_uniform_(weight, a=math.sqrt(5))
    return weight


def parabola_bias(u: Tensor, a: Tensor, b: Optional[Tensor] = None
                  ) -> Tensor:
    """PaPE's logit term ``sum_p -a_ip (u_ip - u_jp)^2 + b_ip (u_ip -
    u_jp)``: projected positions ``u`` ``(n, heads, M, P)``, openings ``a``
    and slopes ``b`` ``(n, heads, M, P | 1)`` of the queries -> ``(n,
    heads, M, M)``. Expanded as the authors' channels are (a row term and
    one matmul over ``2P``), not as an ``(M, M, P)`` difference."""
    a = a.expand_as(u)
    row = -(a * u.square()).sum(-1, keepdim=True)  # (n, h, M, 1)
    left = 2 * a * u
    if b is not None:
        row = row + (b * u).sum(-1, keepdim=True)
        left = left - b
    # the cross terms: (2 a u_i - b) . u_j - a . u_j^2
    return row + torch.cat((left, -a), -1) @ torch.cat(
        (u, u.square()), -1).transpose(-1, -2)


class ParabolaTable(TokenTable):
    """One block's PaPE / PaPE-RI table: the projected positions ``u``
    ``(n, heads, M, P)`` (0 where there is none), ``missing`` ``(n, M)``,
    and the query projections ``weight`` ``(k heads P', C)`` (PaPE: ``k =
    2`` rows ``a`` then ``b``, ``P' = P``; PaPE-RI: ``k = 1``, ``P' = 1``)
    that :meth:`bind` applies to the tokens."""

    def __init__(self, u: Tensor, missing: Tensor, weight: Tensor,
                 slopes: bool, scale: float):
        self.u, self.missing, self.weight = u, missing, weight
        self.slopes, self.scale = slopes, scale
        self.num_tokens = u.shape[-2]

    def bind(self, x: Tensor) -> BiasTable:
        """The bias of the ``(B', N, C)`` tokens ``x`` (the last ``M`` are
        the positioned ones), in fp32 at least outside autocast."""
        batch, heads = x.shape[0], self.u.shape[1]
        m = self.num_tokens
        if x.shape[-2] < m:
            raise ValueError(f'{m} positions given for only {x.shape[-2]} '
                             'tokens')
        with full_precision(x.device.type):
            dtype = torch.promote_types(self.u.dtype, torch.float32)
            feats = x[:, x.shape[1] - m:].to(dtype) @ self.weight.to(
                dtype).t()  # (B', M, k heads P')
            feats = feats.unflatten(-1, (-1, heads, feats.shape[-1] //
                                         (heads * (2 if self.slopes else 1))))
            feats = feats.permute(2, 0, 3, 1, 4)  # (k, B', heads, M, P')
            u = tile_windows(self.u, batch).to(dtype).expand(batch, -1, -1, -1)
            # centred (the bias depends on differences only): smaller
            # squares in the expansion, less fp32 cancellation on large grids
            u = u - u.mean(-2, keepdim=True)
            bias = parabola_bias(u, F.softplus(feats[0]),
                                 feats[1] if self.slopes else None)
            missing = tile_windows(self.missing, batch)
            none = missing[:, None, :, None] | missing[:, None, None, :]
            bias = (bias * self.scale).masked_fill(none, 0.)
        return BiasTable(bias)


class PaPE(PositionScheme):
    """PaPE: per block, ``P`` parabolas per head (module docstring).

    Args:
        parabolas: ``P`` per head (50, the authors' default).
        coords: :class:`~.base.PatchCoords` options (the patch frame, the
            authors' unnormalised positions: the bias depends on position
            differences only).

    Parameters per block ``i``: ``position.<i>`` ``(heads P, 2)`` (``W_u``)
    and ``content.<i>`` ``(2 heads P, C)`` (``W_a`` rows then ``W_b``; ``C
    = heads D``), initialised as ``nn.Linear``.
    """
    OPTIONS = ('parabolas',)

    def __init__(self, head_dim, num_heads, depth, parabolas=50,
                 coords=None):
        super().__init__(head_dim, num_heads, depth, coords)
        if not (isinstance(parabolas, int) and parabolas > 0):
            raise ValueError(f'PaPE parabolas must be a positive int, got '
                             f'{parabolas!r}')
        self.parabolas = parabolas
        width, rows = num_heads * head_dim, num_heads * parabolas
        self.position = nn.ParameterList(
            nn.Parameter(_linear_init(rows, 2)) for _ in range(depth))
        self.content = nn.ParameterList(
            nn.Parameter(_linear_init(2 * rows, width)) for _ in range(depth))

    def block_table(self, index, coords, hw=None) -> ParabolaTable:
        missing = coords.isnan().any(-1)  # (n, M)
        xy = coords.nan_to_num(0.)
        weight = self.position[index]
        dtype = torch.promote_types(xy.dtype, weight.dtype)
        u = xy.to(dtype) @ weight.to(dtype).t()  # (n, M, heads P)
        u = u.unflatten(-1, (self.num_heads, self.parabolas)).transpose(1, 2)
        return ParabolaTable(u, missing, self.content[index], True,
                             self.head_dim**-0.5)


class PaPERI(PositionScheme):
    """PaPE-RI: one isotropic parabola per head (module docstring).

    Args:
        coords: :class:`~.base.PatchCoords` options (patch frame).

    Per block ``i``: ``content.<i>`` ``(heads, C)`` (``w_a``, initialised as
    ``nn.Linear``); buffer ``scales`` ``(depth, heads)``, ``U(-1/sqrt(2),
    1/sqrt(2))`` at init and saved (fixed, as the authors').
    """

    def __init__(self, head_dim, num_heads, depth, coords=None):
        super().__init__(head_dim, num_heads, depth, coords)
        self.content = nn.ParameterList(
            nn.Parameter(_linear_init(num_heads, num_heads * head_dim))
            for _ in range(depth))
        self.register_buffer(
            'scales', (2 * torch.rand(depth, num_heads) - 1) * 0.5**0.5)

    def block_table(self, index, coords, hw=None) -> ParabolaTable:
        missing = coords.isnan().any(-1)  # (n, M)
        xy = coords.nan_to_num(0.)
        scales = self.scales[index].to(xy.dtype)
        u = xy[:, None] * scales[:, None, None]  # (n, heads, M, 2)
        return ParabolaTable(u, missing, self.content[index], False,
                             self.head_dim**-0.5)
