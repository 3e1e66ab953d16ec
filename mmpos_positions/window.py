"""ViTDet's window partition (Li et al., ECCV 2022, Sec. 3): blocks attend
inside ``ws x ws`` windows of the patch grid, zero-padded at its bottom /
right to a multiple of ``ws`` (padding tokens attend unmasked, as ViTDet's
code) and cropped back after the block; the windows' positions:
:meth:`~.base.PositionScheme.forward`.
"""
from typing import Tuple

import torch.nn.functional as F
from torch import Tensor


def padded_hw(hw: Tuple[int, int], window_size: int) -> Tuple[int, int]:
    """``(H, W)`` rounded up to multiples of ``window_size``."""
    return tuple(-(-int(s) // window_size) * window_size for s in hw)


def window_partition(x: Tensor, hw: Tuple[int, int], window_size: int,
                     pad_value: float = 0.) -> Tensor:
    """``(B, H * W, C)`` row-major tokens of the ``hw = (H, W)`` grid ->
    ``(B * nH * nW, ws * ws, C)`` windows of side ``ws = window_size`` of
    the grid padded with ``pad_value`` (``nan`` for coordinates: no
    position); batch-major, then row-major, tokens row-major inside."""
    B, N, C = x.shape
    H, W = hw
    if N != H * W:
        raise ValueError(f'window attention needs exactly the {H}x{W} grid '
                         f'tokens (no class or register tokens), got {N}')
    Hp, Wp = padded_hw(hw, window_size)
    x = F.pad(x.reshape(B, H, W, C), (0, 0, 0, Wp - W, 0, Hp - H),
              value=pad_value)
    ws = window_size
    x = x.view(B, Hp // ws, ws, Wp // ws, ws, C).transpose(2, 3)
    return x.reshape(-1, ws * ws, C)


def window_unpartition(windows: Tensor, hw: Tuple[int, int],
                       window_size: int) -> Tensor:
    """Inverse of :func:`window_partition`: ``(B * nH * nW, ws * ws, C)``
    -> ``(B, H * W, C)``, the padding cropped off."""
    H, W = hw
    Hp, Wp = padded_hw(hw, window_size)
    ws, C = window_size, windows.shape[-1]
    x = windows.view(-1, Hp // ws, Wp // ws, ws, ws, C).transpose(2, 3)
    x = x.reshape(-1, Hp, Wp, C)[:, :H, :W]
    return x.reshape(-1, H * W, C)
