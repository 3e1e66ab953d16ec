"""Non-overlapping window partition for ViTDet-style window attention.

ViTDet (Li et al., "Exploring Plain Vision Transformer Backbones for Object
Detection", ECCV 2022, Sec. 3) runs most blocks of a plain ViT inside
``ws x ws`` windows of the patch grid, without shifts; the grid is padded with
zero tokens at its bottom/right to a multiple of ``ws`` and cropped back
after the block. Padded tokens take part in the attention of their window, as
in ViTDet's code (no mask).

For 2-D RoPE the tokens of a window keep their *absolute* grid coordinates
(:meth:`~mmpos.models.layers.positions.PositionScheme.forward` partitions
them as the tokens), so the rotation of a query or key inside a window is the
one it gets in the global model, and the query-key logit of two tokens of one
window is the global model's logit for that pair.
"""
from typing import Tuple

import torch.nn.functional as F
from torch import Tensor


def padded_hw(hw: Tuple[int, int], window_size: int) -> Tuple[int, int]:
    """``(H, W)`` rounded up to multiples of ``window_size``."""
    return tuple(-(-int(s) // window_size) * window_size for s in hw)


def window_partition(x: Tensor,
                     hw: Tuple[int, int],
                     window_size: int,
                     pad_value: float = 0.) -> Tensor:
    """Split grid tokens into windows.

    Args:
        x: ``(B, H * W, C)`` tokens of the ``hw = (H, W)`` grid, row-major.
        window_size: window side ``ws``.
        pad_value: value of the padding tokens (``nan`` for coordinates:
            no position, see :mod:`mmpos.models.layers.positions`).

    Returns:
        ``(B * nH * nW, ws * ws, C)`` with ``nH, nW`` the windows per column
        and row of the zero-padded grid; windows are ordered batch-major,
        then row-major, tokens row-major inside a window.
    """
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
