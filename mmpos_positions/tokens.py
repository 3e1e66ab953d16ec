"""Position tables that read the block's tokens (context-aware schemes,
e.g. PaPE, :mod:`.pape`): the scheme computes what depends on the
positions once per forward, as every scheme does; the attention layer then
binds the table to the tokens it attends over (:meth:`TokenTable.bind`)
before it rotates queries and keys and adds the bias.

This is the one hook such schemes need from an attention layer:
``rope = rope.bind(x) if isinstance(rope, TokenTable) else rope`` with
``x`` the ``(B, N, C)`` tokens the block's attention receives (after its
norm). An attention layer that does not bind gets one clear error from the
unbound table instead of positions silently left out.
"""
from torch import Tensor

from .base import PositionScheme, PositionTable


class TokenTable(PositionTable):
    """A table whose rotation and bias also depend on the tokens: unbound,
    it positions nothing and refuses to rotate; :meth:`bind` returns the
    table of one attention call."""

    def bind(self, x: Tensor) -> PositionTable:
        """The table for the ``(B', N, C)`` tokens ``x`` of one attention
        call (``B' = B`` images, or ``B nW`` windows batch-major)."""
        raise NotImplementedError

    def rotate_tokens(self, x: Tensor) -> Tensor:
        raise TypeError(f'{type(self).__name__} reads the attention\'s '
                        'tokens: the attention layer must call '
                        'table.bind(tokens) first (mmpos_positions.tokens); '
                        'this one does not support the scheme')


def reads_tokens(scheme: PositionScheme) -> bool:
    """Whether ``scheme``'s tables are :class:`TokenTable` (probed on a
    one-patch grid): they need an attention layer that binds them."""
    return isinstance(scheme(None, (1, 1))[0], TokenTable)


def adds_bias(scheme: PositionScheme) -> bool:
    """Whether ``scheme``'s tables add a bias between the positions of the
    tokens one attention attends over (LookHere; PaPE, which reads the
    tokens too): such tables serve self-attention only (probed on a
    one-patch grid)."""
    table = scheme(None, (1, 1))[0]
    return isinstance(table, TokenTable) or table.attn_bias is not None
