"""Multi-view crops that record where each view came from.

Box convention (``crop_box`` of a view, ``crop_boxes`` of a sample):

* ``(x1, y1, x2, y2)`` float32 in units of the source image (the image as it
  entered the first box-recording transform, normally as loaded), ``[0, 1]``
  across it: ``(x1, y1)`` is where the view's **displayed** top-left corner
  comes from and ``(x2, y2)`` its bottom-right one. A horizontally flipped
  view therefore has ``x1 > x2``, a vertically flipped one ``y1 > y2``.
* A point at fraction ``(u, v)`` of the view's width / height (as the network
  sees it) comes from source position ``(x1 + u (x2 - x1), y1 + v (y2 - y1))``.
  This affine map composes, so crops and flips may come in any order and any
  number inside a view pipeline; resizes leave it unchanged.
* The paper's notation (CR2PQ §3.2, ``p = (top, left, height, width)`` in
  original-image pixels, plus the flips) is :func:`box_to_tlhw`; its inverse
  is :func:`tlhw_to_box`.

Pipeline: put :class:`RandomResizedCropWithBox` and :class:`RandomFlipWithBox`
in each view pipeline of :class:`MultiViewWithBoxes` (any ``num_views``, any
output sizes); it stacks the views' boxes into ``crop_boxes`` of shape
``(V, 4)`` in view order, which ``PackInputs(algorithm_keys=['crop_boxes'])``
puts into the data sample, so a model reads ``(B, V, 4)`` with one
``torch.stack``. Used by CR2PQ (2 views) and ICPF (2 global + 8 local).
"""
import copy
from typing import Sequence, Tuple

import numpy as np
import torch
from mmcv.transforms import RandomFlip
from mmpretrain.datasets.transforms import MultiView, RandomResizedCrop

from mmpos.registry import TRANSFORMS
from mmpos.errors import CropBoxError

BOX_KEY = 'crop_box'
FULL_BOX = (0., 0., 1., 1.)
BOX_TOLERANCE = 1e-4  # float32 round-off of composed crops


def check_crop_boxes(boxes, name: str = 'crop_boxes', extent=(1., 1.),
                     tol: float = BOX_TOLERANCE) -> None:
    """Refuse crop boxes a view cannot come from.

    Every box ``(x1, y1, x2, y2)`` (numpy or torch, any leading shape) must
    be finite, lie inside ``[0, W] x [0, H]`` with ``(W, H) = extent``
    (``(1, 1)`` for the normalised boxes of this module, the image size for
    pixel boxes) up to ``tol``, and have ``x1 != x2``, ``y1 != y2``; flipped
    boxes (``x1 > x2`` / ``y1 > y2``) are valid.

    Raises:
        CropBoxError: naming ``name``, the index and the values of the first
            bad box.
    """
    arr = np.asarray(
        boxes.detach().cpu() if hasattr(boxes, 'detach') else boxes,
        dtype=np.float64)
    if arr.shape[-1:] != (4, ):
        raise CropBoxError(f'{name} must be (..., 4) boxes (x1, y1, x2, y2), '
                           f'got shape {arr.shape}')
    width, height = extent
    finite = np.isfinite(arr).all(-1)
    xs, ys = arr[..., 0::2], arr[..., 1::2]
    inside = ((xs >= -tol) & (xs <= width + tol) & (ys >= -tol) &
              (ys <= height + tol)).all(-1)
    sized = (np.abs(xs[..., 1] - xs[..., 0]) > 0) & (
        np.abs(ys[..., 1] - ys[..., 0]) > 0)
    outside = f'lies outside the image [0, {width:g}] x [0, {height:g}]'
    for ok, what in ((finite, 'is not finite'), (inside, outside),
                     (sized, 'has zero width or height')):
        if not ok.all():
            index = tuple(int(i) for i in np.argwhere(~ok)[0])
            box = [round(float(v), 4) for v in arr[index]]
            where = f'{name}{list(index)}' if index else name
            raise CropBoxError(f'{where} = {box} {what} (x1, y1, x2, y2; '
                               'x1 > x2 marks a flip)')


def stack_crop_boxes(data_samples, key: str, owner: str, device=None,
                     min_views: int = 1) -> torch.Tensor:
    """The ``(B, V, 4)`` float32 crop boxes of a batch, read from ``key``
    of every data sample and checked (:func:`check_crop_boxes`) on the host
    before they move to ``device``.

    Raises:
        KeyError: a sample lacks ``key`` (or there are none); the message
            names ``owner``, the model that needs the boxes.
        CropBoxError: a box no view can come from.
        ValueError: the boxes are not ``(V, 4)`` per sample with ``V >=
            min_views``.
    """
    if not data_samples or any(key not in s for s in data_samples):
        raise KeyError(f'{owner} needs crop boxes in every data sample under '
                       f'{key!r} (MultiViewWithBoxes + '
                       f'PackInputs(algorithm_keys=[{key!r}]))')
    boxes = torch.stack([
        torch.as_tensor(s.get(key), dtype=torch.float32)
        for s in data_samples
    ])
    check_crop_boxes(boxes, key)  # on the host: no device sync
    if boxes.dim() != 3 or boxes.shape[1] < min_views or boxes.shape[2] != 4:
        views = f'V >= {min_views}' if min_views > 1 else 'V'
        raise ValueError(f'{key} must be ({views}, 4) per sample, got '
                         f'{tuple(boxes.shape[1:])}')
    return boxes.to(device)


def current_box(results: dict) -> np.ndarray:
    """The view's box so far (a copy), the whole image if none recorded."""
    return np.array(results.get(BOX_KEY, FULL_BOX), dtype=np.float32)


def crop_box(box: np.ndarray, img_hw: Sequence[int], top: float, left: float,
             height: float, width: float) -> np.ndarray:
    """Box of the pixel crop ``(top, left, height, width)`` of an ``img_hw``
    image whose own box is ``box`` (pixel edges: rows ``top`` to
    ``top + height``)."""
    h, w = img_hw
    x1, y1, x2, y2 = box
    sx, sy = (x2 - x1) / w, (y2 - y1) / h  # source units per pixel
    return np.array([x1 + left * sx, y1 + top * sy, x1 + (left + width) * sx,
                     y1 + (top + height) * sy], dtype=np.float32)


def box_to_tlhw(boxes, img_hw: Sequence[int]) -> Tuple:
    """Paper notation of boxes ``(..., 4)`` for a source of size ``img_hw``.

    Returns ``(tlhw, hflip, vflip)``: ``(..., 4)`` ``(top, left, height,
    width)`` in source pixels and two boolean ``(...)`` flip flags (numpy).
    """
    h, w = img_hw
    x1, y1, x2, y2 = (boxes[..., i] for i in range(4))
    lo_x, hi_x = np.minimum(x1, x2), np.maximum(x1, x2)
    lo_y, hi_y = np.minimum(y1, y2), np.maximum(y1, y2)
    tlhw = np.stack([lo_y * h, lo_x * w, (hi_y - lo_y) * h,
                     (hi_x - lo_x) * w], axis=-1)
    return tlhw, x1 > x2, y1 > y2


def tlhw_to_box(tlhw, img_hw: Sequence[int], hflip=False,
                vflip=False) -> np.ndarray:
    """Inverse of :func:`box_to_tlhw` (numpy, float32)."""
    h, w = img_hw
    tlhw = np.asarray(tlhw, dtype=np.float64)
    top, left, bh, bw = (tlhw[..., i] for i in range(4))
    x1, x2 = left / w, (left + bw) / w
    y1, y2 = top / h, (top + bh) / h
    hflip, vflip = np.asarray(hflip), np.asarray(vflip)
    box = np.stack([
        np.where(hflip, x2, x1), np.where(vflip, y2, y1),
        np.where(hflip, x1, x2), np.where(vflip, y1, y2)
    ], axis=-1)
    return box.astype(np.float32)


@TRANSFORMS.register_module()
class RandomResizedCropWithBox(RandomResizedCrop):
    """mmpretrain's ``RandomResizedCrop`` that also updates ``crop_box``.

    Same arguments and sampling. **Added/modified keys:** ``crop_box``
    (see the module docstring; the crop's pixel box ``(top, left, height,
    width)`` in the input image maps through the input's own box).
    """

    def rand_crop_params(self, img):
        # Remember the parent's own draw so ``transform`` can record it.
        # (``cache_random_params`` around the parent's call re-wrapped the
        # method on every call and overflowed the stack after ~1000 calls.)
        self._last_crop = super().rand_crop_params(img)
        return self._last_crop

    def transform(self, results: dict) -> dict:
        img_hw = results['img'].shape[:2]
        results = super().transform(results)
        top, left, height, width = self._last_crop
        results[BOX_KEY] = crop_box(
            current_box(results), img_hw, top, left, height, width)
        return results


@TRANSFORMS.register_module()
class RandomFlipWithBox(RandomFlip):
    """mmcv's ``RandomFlip`` that also flips ``crop_box``.

    Same arguments (``prob``, ``direction``: ``'horizontal'``,
    ``'vertical'``, ``'diagonal'`` or lists). A horizontal flip swaps ``x1``
    and ``x2``, a vertical one ``y1`` and ``y2``, diagonal both. Sets
    ``flip`` / ``flip_direction`` as the parent.
    """

    def _flip(self, results: dict) -> None:
        super()._flip(results)
        box = current_box(results)
        direction = results['flip_direction']
        if direction in ('horizontal', 'diagonal'):
            box[[0, 2]] = box[[2, 0]]
        if direction in ('vertical', 'diagonal'):
            box[[1, 3]] = box[[3, 1]]
        results[BOX_KEY] = box


@TRANSFORMS.register_module()
class MultiViewWithBoxes(MultiView):
    """mmpretrain's ``MultiView`` that also stacks the views' boxes.

    Same arguments (``transforms``: one pipeline per group, ``num_views``:
    views per group). Every view pipeline must record its box (contain a
    ``*WithBox`` crop), else a ``KeyError`` names the group.

    **Added keys:** ``img`` (list of ``V`` views, as the parent) and
    ``crop_boxes``: float32 ``(V, 4)``, row ``v`` the box of view ``v``,
    checked with :func:`check_crop_boxes`.
    """

    def transform(self, results: dict) -> dict:
        groups = [g for g, n in enumerate(self.num_views) for _ in range(n)]
        imgs, boxes = [], []
        for group, pipeline in zip(groups, self.transforms):
            view = pipeline(copy.deepcopy(results))
            if BOX_KEY not in view:
                raise KeyError(
                    f'view pipeline {group} of MultiViewWithBoxes recorded '
                    f'no {BOX_KEY!r}: use RandomResizedCropWithBox (and '
                    f'RandomFlipWithBox) in it')
            imgs.append(view['img'])
            boxes.append(view[BOX_KEY])
        results['img'] = imgs
        results['crop_boxes'] = np.stack(boxes).astype(np.float32)
        check_crop_boxes(results['crop_boxes'],
                         f'crop_boxes of {results.get("img_path", "image")}')
        return results


__all__ = [
    'CropBoxError', 'MultiViewWithBoxes', 'RandomFlipWithBox',
    'RandomResizedCropWithBox', 'box_to_tlhw', 'check_crop_boxes', 'crop_box',
    'current_box', 'stack_crop_boxes', 'tlhw_to_box'
]
