"""QB-Heat predictor: projection + linear heat prediction (Sec. 4, App. A).

The encoder sees one unmasked quarter-block (half width, half height) of
the image. Its feature map ``z`` is projected to ``C = 512`` channels and
the three masked quarters are extrapolated with the finite-difference form
of ``dz/dx = A z``, ``dz/dy = B z`` (Eq. 5), every prediction being one
shared ``C x C`` matrix per (scale, direction), i.e. a 1x1 conv (Fig. 3):

* right / left: ``I + dx A``, down / up: ``I + dy B``;
* diagonal (Eq. 10-12): ``I + sqrt(dx^2 + dy^2) C`` with, when ``C`` is
  derived, ``sqrt(dx^2+dy^2) C = dx A + dy B + dx dy (AB + BA) / 2``, the
  average of ``(I + dx A)(I + dy B)`` and ``(I + dy B)(I + dx A)`` (equal
  to Eq. 5's ``(I + dx A)(I + dy B)`` when A and B commute).

Layouts (Fig. 4). The image is a 4 x 4 grid of *cells* (side/4 each) and
the unmasked quarter is 2 x 2 cells, so every layout predicts 12 cells:

* corner (layouts 0-3: top-left, top-right, bottom-left, bottom-right),
  ``dx = dy = 1/2``: each masked quarter is the unmasked one moved by half
  the image along x, y or both;
* center (layout 4), ``dx = dy = 1/4``: the central quarter is split into
  its four sub-blocks (cells) and each of the 12 border cells is predicted
  from the adjacent central cell (straight for edge cells, diagonal for
  the four corner cells).

Offsets are measured in image sides (the side along each axis), so
``dx = dy`` for every aspect ratio and A, B have units "per image side".
Each scale learns its own matrices (``A^{1/2}, B^{1/2}`` and
``A^{1/4}, B^{1/4}``, Fig. 7).

Explicit models (Fig. 5): ``2`` learns right ``A1`` and down ``B1``; left
and up use ``A2 = -A1``, ``B2 = -B1`` (Eq. 9) and diagonals Eq. 12. ``4``
learns right, left, down, up; diagonals Eq. 12 from the matching pair.
``8`` learns every direction, diagonals as ``I + sqrt(2) d C``.
The matrices start at zero, i.e. the predictor starts as a plain copy.
"""
import math
from typing import Sequence, Tuple

import torch
import torch.nn as nn
from torch import Tensor

from mmpos.registry import MODELS

# (dy, dx) of the 8 prediction directions, in this order everywhere.
DIRECTIONS = ((0, 1), (0, -1), (1, 0), (-1, 0), (1, 1), (1, -1), (-1, 1),
              (-1, -1))
# prediction offset (image sides) of each scale
SCALES = {'corner': 0.5, 'center': 0.25}
CENTER = 4  # layout id of the centre quarter; 0-3 are the corners
NUM_LAYOUTS = 5
# top-left cell (row, col) of the unmasked quarter in the 4 x 4 grid
LAYOUT_ORIGIN = ((0, 0), (0, 2), (2, 0), (2, 2), (1, 1))


def _layout_tables() -> Tuple[Tensor, Tensor]:
    """Per layout: ``jobs`` (5, 12, 3) rows ``(src cell 0-3, dst cell
    0-15, direction 0-7)`` and ``keep`` (5, 4) the grid cells of the
    unmasked cells 0-3 (cells are numbered row-major)."""
    jobs, keep = [], []
    for r0, c0 in LAYOUT_ORIGIN:
        keep.append([(r0 + i) * 4 + c0 + j for i in (0, 1) for j in (0, 1)])
        rows = []
        for r in range(4):
            for c in range(4):
                if r0 <= r < r0 + 2 and c0 <= c < c0 + 2:
                    continue
                if (r0, c0) == (1, 1):  # centre: nearest central cell
                    sr, sc = min(max(r, 1), 2), min(max(c, 1), 2)
                    dy, dx = r - sr, c - sc
                else:  # corner: same cell of the unmasked quarter
                    sr, sc = r0 + r % 2, c0 + c % 2
                    dy, dx = (r - sr) // 2, (c - sc) // 2
                src = (sr - r0) * 2 + sc - c0
                rows.append([src, r * 4 + c, DIRECTIONS.index((dy, dx))])
        jobs.append(rows)
    return torch.tensor(jobs), torch.tensor(keep)


def crop_quarter_blocks(images: Tensor, layouts: Tensor) -> Tensor:
    """Cut each image's unmasked quarter-block.

    Args:
        images: (B, C, H, W), H and W divisible by 4.
        layouts: (B,) layout ids 0-4.
    Returns:
        (B, C, H / 2, W / 2).
    """
    B, C, H, W = images.shape
    origin = torch.tensor(LAYOUT_ORIGIN, device=images.device)[layouts]
    rows = origin[:, 0:1] * (H // 4) + torch.arange(H // 2,
                                                    device=images.device)
    cols = origin[:, 1:2] * (W // 4) + torch.arange(W // 2,
                                                    device=images.device)
    out = images.gather(2, rows[:, None, :, None].expand(B, C, H // 2, W))
    return out.gather(3, cols[:, None, None, :].expand(B, C, H // 2, W // 2))


@MODELS.register_module()
class QBHeatPredictor(nn.Module):
    """Projection to ``embed_dims`` + linear prediction of masked quarters.

    Args:
        in_channels: encoder output channels.
        embed_dims: predictor width (512 in the paper).
        num_explicit: 2, 4 or 8 explicit linear models per scale (Fig. 5);
            8 by default, the setting of Tab. 2's default row (a) "corner +
            center", whose numbers equal row (b) "8" and Tab. 4 / 6.
        positions: scales with their own models, ``'corner'`` and/or
            ``'center'`` (Fig. 4).
    """

    def __init__(self, in_channels: int, embed_dims: int = 512,
                 num_explicit: int = 8,
                 positions: Sequence[str] = ('corner', 'center')):
        super().__init__()
        if num_explicit not in (2, 4, 8):
            raise ValueError(f'QBHeatPredictor: num_explicit must be 2, 4 or '
                             f'8, got {num_explicit}')
        positions = tuple(positions)
        if not positions or any(p not in SCALES for p in positions) or \
                len(set(positions)) != len(positions):
            raise ValueError(f'QBHeatPredictor: positions must be distinct '
                             f'items of {tuple(SCALES)}, got {positions}')
        self.embed_dims = embed_dims
        self.num_explicit = num_explicit
        self.positions = positions
        self.proj = nn.Conv2d(in_channels, embed_dims, 1)
        self.weight = nn.Parameter(
            torch.zeros(len(positions), num_explicit, embed_dims, embed_dims))
        jobs, keep = _layout_tables()
        self.register_buffer('jobs', jobs, persistent=False)
        self.register_buffer('keep', keep, persistent=False)

    def scale_index(self, layouts: Tensor) -> Tensor:
        """(B,) layout ids -> (B,) index into ``positions``."""
        is_center = layouts == CENTER
        pos = self.positions
        needed = {'center'} if is_center.any() else set()
        needed |= set() if is_center.all() else {'corner'}
        if needed - set(pos):
            raise ValueError(f'QBHeatPredictor: layouts need positions '
                             f'{sorted(needed - set(pos))}, missing from '
                             f'positions={pos}')
        index = {p: pos.index(p) for p in pos}
        return torch.where(is_center, index.get('center', -1),
                           index.get('corner', -1)).long()

    def explicit_models(self, position: str) -> Tuple[Tensor, Tensor]:
        """The right and down generators ``(A1, B1)`` of one scale, each
        (C, C) -- the matrices of Eq. 5 that the spectrum tool analyses."""
        w = self.weight[self.positions.index(position)]
        return w[0], w[{2: 1, 4: 2, 8: 2}[self.num_explicit]]

    def transition_matrices(self, position: str) -> Tensor:
        """The 8 effective 1x1-conv matrices ``T_d`` of one scale (order of
        ``DIRECTIONS``), (8, C, C): ``z(p + d * delta) = T_d z(p)``."""
        w = self.weight[self.positions.index(position)]
        delta = SCALES[position]
        eye = torch.eye(self.embed_dims, dtype=w.dtype, device=w.device)
        if self.num_explicit == 8:
            step = [delta if 0 in d else math.sqrt(2) * delta
                    for d in DIRECTIONS]
            return eye + torch.stack([s * m for s, m in zip(step, w)])
        if self.num_explicit == 2:  # Eq. 9; AB + BA shared up to sign
            a = {1: w[0], -1: -w[0]}
            b = {1: w[1], -1: -w[1]}
            sym = w[0] @ w[1] + w[1] @ w[0]
            ab = {(sy, sx): sy * sx * sym for sy in (1, -1) for sx in (1, -1)}
        else:
            a = {1: w[0], -1: w[1]}
            b = {1: w[2], -1: w[3]}
            ab = {(sy, sx): a[sx] @ b[sy] + b[sy] @ a[sx]
                  for sy in (1, -1) for sx in (1, -1)}
        mats = []
        for dy, dx in DIRECTIONS:
            if dy == 0:
                mats.append(eye + delta * a[dx])
            elif dx == 0:
                mats.append(eye + delta * b[dy])
            else:  # Eq. 12 times sqrt(dx^2 + dy^2)
                mats.append(eye + delta * (a[dx] + b[dy]) +
                            delta * delta * ab[dy, dx] / 2)
        return torch.stack(mats)

    def forward(self, feats: Tensor, layouts: Tensor) -> Tuple[Tensor, Tensor]:
        """Predict the whole-image feature map from the quarter's.

        Args:
            feats: (B, C_in, h, w) encoder output of the quarter-blocks,
                ``h`` and ``w`` even (image side divisible by 4 x
                stride, 64 at stride 16).
            layouts: (B,) layout ids (0-3 corners, 4 centre).
        Returns:
            canvas (B, C, 2h, 2w): projected unmasked features placed at
            their position, predictions elsewhere; mask (B, 2h, 2w) bool,
            True where predicted (the masked 75%).
        """
        B, _, h, w = feats.shape
        if h % 2 or w % 2:
            raise ValueError(f'QBHeatPredictor: quarter feature map {h}x{w} '
                             f'must have even sides (image side divisible '
                             f'by 4 x encoder stride)')
        z = self.proj(feats)
        C, n = self.embed_dims, h * w // 4
        cells = z.reshape(B, C, 2, h // 2, 2, w // 2).permute(
            0, 2, 4, 1, 3, 5).reshape(B, 4, C, n)
        jobs = self.jobs[layouts]  # (B, 12, 3)
        mats = torch.cat([self.transition_matrices(p)
                          for p in self.positions])  # (S * 8, C, C)
        mat_idx = (self.scale_index(layouts)[:, None] * 8 +
                   jobs[..., 2]).flatten()
        src = cells.gather(1, jobs[..., 0, None, None].expand(-1, -1, C, n))
        src = src.flatten(0, 1)
        pred = torch.empty_like(src)
        for k in mat_idx.unique().tolist():
            sel = (mat_idx == k).nonzero()[:, 0]
            pred[sel] = mats[k] @ src[sel]
        batch = torch.arange(B, device=z.device)[:, None]
        canvas = z.new_zeros(B, 16, C, n)
        canvas[batch, self.keep[layouts]] = cells
        canvas[batch, jobs[..., 1]] = pred.view(B, 12, C, n)
        canvas = canvas.view(B, 4, 4, C, h // 2, w // 2).permute(
            0, 3, 1, 4, 2, 5).reshape(B, C, 2 * h, 2 * w)
        mask = torch.zeros(B, 16, dtype=torch.bool, device=z.device)
        mask[batch, jobs[..., 1]] = True
        mask = mask.view(B, 4, 1, 4, 1).expand(B, 4, h // 2, 4, w // 2)
        return canvas, mask.reshape(B, 2 * h, 2 * w)
