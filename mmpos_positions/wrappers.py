"""Opt-in wrappers around a :class:`~.base.PositionScheme` (the schemes keep
no state between forwards): :class:`CachedTables` reuses a grid's eval
tables, :class:`FrozenTables` holds them as constants of an exported graph.
"""
from typing import List, Optional, Sequence

import torch
import torch.nn as nn
from torch import Tensor

from .base import PositionScheme, PositionTable, table_device_dtype


class CachedTables:
    """``cache(scheme, coords, hw, batch_size, windows, device, dtype)``:
    ``scheme(...)``'s tables, the eval tables of the grid (``coords=None``)
    reused while the scheme, ``hw``, ``windows``, ``device``, ``dtype`` and
    the scheme's parameters and buffers (compared with copies: an optimizer
    step, EMA update or loaded checkpoint recomputes) are the last call's.
    Computed every time in training mode, for given coordinates, for tables
    that need a gradient and in compiled or exported forwards (the tables
    are part of the graph). A plain object: no state-dict entry.
    """

    def __init__(self):
        self.entry = None  # (key, parameter copies, tables)

    def __call__(self, scheme: PositionScheme, coords: Optional[Tensor],
                 hw: Optional[Sequence[int]], batch_size: int = 1,
                 windows: Sequence[int] = (), device=None,
                 dtype: Optional[torch.dtype] = None) -> List[PositionTable]:
        # dynamo cannot trace the data-dependent check of the copies
        if coords is not None or scheme.training or \
                torch.compiler.is_compiling() or (
                    torch.is_grad_enabled() and
                    any(p.requires_grad for p in scheme.parameters())):
            return scheme(coords, hw, batch_size, windows, device, dtype)
        state = [*scheme.parameters(), *scheme.buffers()]
        key = (id(scheme), tuple(int(s) for s in hw), tuple(windows),
               *table_device_dtype(coords, device, dtype),
               [(t.dtype, t.device, t.shape) for t in state])
        if self.entry is None or self.entry[0] != key or not all(
                map(torch.equal, state, self.entry[1])):
            tables = scheme(None, hw, batch_size, windows, device, dtype)
            self.entry = (key, [t.detach().clone() for t in state], tables)
        return self.entry[2]


class FrozenTables(nn.Module):
    """``scheme``'s eval tables of the ``hw`` grid (for ``windows``, on
    ``device``), computed once as :meth:`~.base.PositionTable.export`
    gives them (real tensors) and returned by every forward on that grid:
    the scheme of a backbone exported for one input size. :attr:`scheme`:
    the wrapped scheme (a backbone unwraps it to unfreeze)."""

    def __init__(self, scheme: PositionScheme, hw: Sequence[int],
                 windows: Sequence[int] = (), device=None):
        super().__init__()
        self.scheme, self.hw = scheme, tuple(int(s) for s in hw)
        was_training = scheme.training
        scheme.eval()
        with torch.no_grad():
            tables = scheme(None, hw, 1, windows, device=device)
        scheme.train(was_training)
        self.frozen = [t.export() for t in tables]

    def forward(self, coords: Optional[Tensor], hw: Optional[Sequence[int]],
                *args, **kwargs) -> List[PositionTable]:
        if coords is not None or tuple(hw) != self.hw:
            raise ValueError(f'positions frozen for the {self.hw} grid '
                             f'(export), got hw={hw}, coords given: '
                             f'{coords is not None}')
        return self.frozen
