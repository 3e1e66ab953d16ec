"""Positional vector field cropped with the views (ICPF §3.2).

Coordinates: a crop box is ``(x1, y1, x2, y2)`` in units of the (virtual)
image, ``[0, 1]`` across it; ``x1 > x2`` encodes a horizontally flipped
view (the field is then sampled right to left, as the pixels were). The
field ``P`` (``d x h_P x w_P``) spans the unit square with its corners on the
image corners (``align_corners=False`` convention: cell ``(i, j)`` is
centred at ``((j + .5) / w_P, (i + .5) / h_P)``), and a view of ``h x w``
patches reads it bilinearly at its patch centres. So the crop of the whole
image on a grid equals resizing the field to that grid (bilinear,
``align_corners=False``), which is also how the field becomes a standard
ViT ``pos_embed`` after pretraining (:func:`field_to_pos_embed`).
"""
from typing import Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.model import BaseModule
from mmengine.model.weight_init import trunc_normal_
from torch import Tensor

from mmpos.registry import MODELS

SCALE_DISTRIBUTIONS = ('const', 'uniform', 'beta')


def patch_centre_grid(boxes: Tensor, hw: Sequence[int]) -> Tensor:
    """``grid_sample`` grid of the patch centres of each box.

    Args:
        boxes: ``(B, 4)`` boxes ``(x1, y1, x2, y2)`` in image units.
        hw: patch grid ``(h, w)``.

    Returns:
        ``(B, h, w, 2)`` ``(x, y)`` in ``[-1, 1]`` image coordinates.
    """
    if boxes.dim() != 2 or boxes.shape[-1] != 4:
        raise ValueError(f'boxes must be (B, 4), got {tuple(boxes.shape)}')
    h, w = hw
    frac_y = (torch.arange(h, device=boxes.device, dtype=boxes.dtype) +
              .5) / h
    frac_x = (torch.arange(w, device=boxes.device, dtype=boxes.dtype) +
              .5) / w
    x1, y1, x2, y2 = boxes.unbind(-1)
    xs = x1[:, None] + frac_x * (x2 - x1)[:, None]  # (B, w)
    ys = y1[:, None] + frac_y * (y2 - y1)[:, None]  # (B, h)
    grid = torch.stack(torch.broadcast_tensors(xs[:, None, :], ys[:, :, None]),
                       dim=-1)
    return grid * 2 - 1


def sample_field(field: Tensor, boxes: Tensor, hw: Sequence[int]) -> Tensor:
    """Crop ``field`` with each box and sample it on the patch grid.

    Args:
        field: ``(1, d, h_P, w_P)``.
        boxes: ``(B, 4)`` crop boxes in image units.
        hw: patch grid ``(h, w)``.

    Returns:
        ``(B, h * w, d)`` per-patch positional vectors, row-major.
    """
    grid = patch_centre_grid(boxes.to(field.dtype), hw)
    out = F.grid_sample(
        field.expand(boxes.shape[0], -1, -1, -1),
        grid,
        mode='bilinear',
        padding_mode='border',
        align_corners=False)
    return out.flatten(2).transpose(1, 2)


def field_to_pos_embed(field: Tensor,
                       hw: Sequence[int],
                       cls_pos: Optional[Tensor] = None) -> Tensor:
    """Convert the field into a ViT ``pos_embed`` for an ``h x w`` grid.

    The whole-image crop of the field on the grid (bilinear resize,
    ``align_corners=False``), i.e. exactly what the model saw for a view
    covering the image. ``cls_pos`` ``(1, 1, d)`` (the backbone's
    ``pos_embed[:, :1]``) is prepended when given.

    Returns:
        ``(1, [1 +] h * w, d)``.
    """
    full = torch.tensor([[0., 0., 1., 1.]], device=field.device)
    pos = sample_field(field, full, hw)
    if cls_pos is not None:
        pos = torch.cat([cls_pos.to(pos), pos], dim=1)
    return pos


def sample_scales(num: int,
                  distribution: str = 'beta',
                  scale_range: Tuple[float, float] = (0.2, 1.0),
                  beta: Tuple[float, float] = (2., 5.),
                  device=None) -> Tensor:
    """Target areas ``s`` of the views' bounding rectangle (§3.2.2).

    ``'beta'``: ``s_min + (s_max - s_min) * Beta(a, b)`` (Beta(2, 5) is the
    paper's default, mean ``s_min + 2/7 (s_max - s_min)``); ``'uniform'`` on
    ``[s_min, s_max]``; ``'const'``: ``s_max`` (Table 4a's ``s = 1``).
    Uses the global torch RNG.

    Returns:
        ``(num,)`` float32.
    """
    s_min, s_max = scale_range
    if not 0 < s_min <= s_max <= 1:
        raise ValueError(f'scale_range must satisfy 0 < s_min <= s_max <= 1, '
                         f'got {scale_range}')
    if distribution == 'const':
        return torch.full((num, ), float(s_max), device=device)
    if distribution == 'uniform':
        unit = torch.rand(num, device=device)
    elif distribution == 'beta':
        conc = torch.tensor(beta, dtype=torch.float32, device=device)
        unit = torch.distributions.Beta(conc[0], conc[1]).sample((num, ))
    else:
        raise ValueError(f'scale distribution {distribution!r} is not one of '
                         f'{SCALE_DISTRIBUTIONS}')
    return s_min + (s_max - s_min) * unit


def scale_shift_boxes(boxes: Tensor, scales: Tensor,
                      num_ref_views: Optional[int] = None) -> Tensor:
    """Position and scale augmentation ``t_s`` of §3.2.2.

    For each image, ``A`` is the smallest rectangle enclosing the boxes of
    its first ``num_ref_views`` views (``None``: all views). ``A`` is scaled
    about its corner by ``sqrt(s / |A|)`` (so its area becomes ``s``) and
    placed uniformly at random inside the unit (virtual) image; the same map
    is applied to every view's box. Our choice where the paper is silent: if
    the scaled ``A`` would be wider or taller than the image, the factor is
    reduced to ``1 / max(width, height)`` of ``A`` so that ``A`` stays
    inside the virtual image. With ``A`` enclosing all views every view
    stays inside; views outside a smaller ``A`` may leave it (the field is
    then sampled at its border).

    Args:
        boxes: ``(B, V, 4)`` boxes of the ``V`` views in image units.
        scales: ``(B,)`` target areas ``s``.
        num_ref_views: views (leading) that define ``A``.

    Returns:
        ``(B, V, 4)`` transformed boxes (flips preserved).
    """
    if boxes.dim() != 3 or boxes.shape[-1] != 4:
        raise ValueError(f'boxes must be (B, V, 4), got {tuple(boxes.shape)}')
    corners = boxes.reshape(boxes.shape[0], -1, 2)  # (B, 2V, (x, y))
    ref = corners[:, :None if num_ref_views is None else 2 * num_ref_views]
    lo = ref.amin(dim=1)
    size = (ref.amax(dim=1) - lo).clamp_min(1e-6)  # (B, 2)
    factor = torch.sqrt(scales.to(size) / size.prod(-1))
    factor = torch.minimum(factor, 1. / size.amax(-1))
    new_lo = torch.rand_like(lo) * (1 - factor[:, None] * size).clamp_min(0)
    out = (corners - lo[:, None]) * factor[:, None, None] + new_lo[:, None]
    return out.reshape(boxes.shape)


@MODELS.register_module()
class PositionalField(BaseModule):
    """Learnable positional vector field ``P`` in ``R^{h_P x w_P x d}``.

    Stored as ``field`` of shape ``(1, d, h_P, w_P)``, initialised like a ViT
    APE (truncated normal, std 0.02). Calling it crops and samples it
    (:func:`sample_field`); :meth:`to_pos_embed` exports it as a ViT APE.

    Args:
        embed_dims: ``d``, the backbone width.
        size: ``(h_P, w_P)`` or an int (50 x 50 in the paper; 19 in Table 4b).
        init_std: std of the initial values.
    """

    def __init__(self,
                 embed_dims: int,
                 size=50,
                 init_std: float = .02,
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        size = (size, size) if isinstance(size, int) else tuple(size)
        if len(size) != 2 or min(size) < 1:
            raise ValueError(f'PositionalField size must be (h, w) >= 1, '
                             f'got {size}')
        self.init_std = init_std
        self.field = nn.Parameter(torch.zeros(1, embed_dims, *size))

    def init_weights(self):
        super().init_weights()
        trunc_normal_(self.field, std=self.init_std)

    def forward(self, boxes: Tensor, hw: Sequence[int]) -> Tensor:
        """``boxes`` ``(B, 4)`` -> positional vectors ``(B, h * w, d)``."""
        return sample_field(self.field, boxes, hw)

    def to_pos_embed(self, hw: Sequence[int],
                     cls_pos: Optional[Tensor] = None) -> Tensor:
        """See :func:`field_to_pos_embed`."""
        return field_to_pos_embed(self.field, hw, cls_pos)


__all__ = [
    'PositionalField', 'field_to_pos_embed', 'patch_centre_grid',
    'sample_field', 'sample_scales', 'scale_shift_boxes'
]
