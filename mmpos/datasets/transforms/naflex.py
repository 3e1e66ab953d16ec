"""NaFlex data pipeline: every image at its own aspect ratio, sized by a
token budget, as a sequence of patches with their grid coordinates
(NaViT, Dehghani et al. 2023; timm's NaFlexViT layout).

* :func:`naflex_size`: the image size for a budget of ``max_tokens``
  patches (timm 1.0.31's rule, ``get_image_size_for_seq``: the largest
  scale ``s`` whose patch grid ``ceil(h s / p) x ceil(w s / p)`` holds at
  most ``max_tokens`` patches, each side at least one patch);
* :class:`NaFlexResize`: resize ``img`` to that size;
  :class:`NaFlexRandomResizedCrop` first crops at a random aspect ratio;
* :class:`NaFlexPatchify`: ``img`` -> ``naflex = dict(patches, patch_coord)``,
  ``(h w, p p c)`` pixels row-major over the grid, each patch ``(row,
  column, channel)`` (timm's ``channels_last``), and ``(h w, 2)`` integer
  ``(y, x)``;
* :class:`PackNaFlexInputs`: ``inputs`` = that dict as tensors, the data
  sample as :class:`mmpretrain.datasets.PackInputs` packs it.

:func:`~mmpos.datasets.naflex_collate` pads a batch of them to its longest
sequence with ``patch_valid``; the backbone's
:meth:`~mmpos.models.backbones.RoPEVisionTransformer.forward_naflex` runs
it.
"""
import math
from typing import Optional, Sequence, Tuple, Union

import mmcv
import numpy as np
import torch
from mmcv.transforms import BaseTransform
from mmpretrain.datasets.transforms import PackInputs

from mmpos.registry import TRANSFORMS


def _pair(value: Union[int, Sequence[int]]) -> Tuple[int, int]:
    return (value, value) if isinstance(value, int) else tuple(value)


def naflex_size(image_hw: Sequence[int], patch_size: Union[int,
                                                           Sequence[int]],
                max_tokens: int,
                max_ratio: Optional[float] = None) -> Tuple[int, int]:
    """``(H', W')``, multiples of the patch, of an ``image_hw = (h, w)``
    image for a budget of ``max_tokens`` patches (timm's rule, module
    docstring).

    The grid ``ceil(h s / p_h) x ceil(w s / p_w)`` grows with ``s`` in
    steps at ``s = k p_h / h`` and ``s = k p_w / w``; the largest feasible
    ``s`` is one of these steps, so it is found exactly among them instead
    of by timm's bisection. ``max_ratio``: at most that scale (no
    upsampling beyond it).
    """
    (h, w), (ph, pw) = image_hw, _pair(patch_size)
    if min(h, w, ph, pw) <= 0 or max_tokens < 1:
        raise ValueError(f'naflex_size needs a positive image size, patch '
                         f'and budget, got {image_hw}, {patch_size}, '
                         f'{max_tokens}')

    def grid(scale):
        return (max(math.ceil(h * scale / ph - 1e-9), 1),
                max(math.ceil(w * scale / pw - 1e-9), 1))

    steps = {k * ph / h for k in range(1, max_tokens + 1)}
    steps |= {k * pw / w for k in range(1, max_tokens + 1)}
    scale = max(s for s in steps if math.prod(grid(s)) <= max_tokens)
    if max_ratio is not None:
        scale = min(scale, max_ratio)
    gh, gw = grid(scale)
    return gh * ph, gw * pw


def patchify(img: np.ndarray,
             patch_size: Union[int, Sequence[int]]) -> Tuple[np.ndarray,
                                                             np.ndarray]:
    """``img`` ``(H, W, c)`` (sides multiples of the patch) -> patches
    ``(h w, p_h p_w c)`` row-major over the ``h x w`` grid, each patch in
    ``(row, column, channel)`` order, and their ``(y, x)`` ``(h w, 2)``
    int64."""
    ph, pw = _pair(patch_size)
    img = img[..., None] if img.ndim == 2 else img
    H, W, c = img.shape
    if H % ph or W % pw:
        raise ValueError(f'patchify needs sides that are multiples of the '
                         f'patch {ph}x{pw}, got {H}x{W}')
    h, w = H // ph, W // pw
    patches = img.reshape(h, ph, w, pw, c).transpose(0, 2, 1, 3, 4)
    ys, xs = np.meshgrid(np.arange(h), np.arange(w), indexing='ij')
    coord = np.stack((ys.ravel(), xs.ravel()), -1).astype(np.int64)
    return np.ascontiguousarray(patches.reshape(h * w, ph * pw * c)), coord


@TRANSFORMS.register_module()
class NaFlexResize(BaseTransform):
    """Resize ``img`` at its aspect ratio to :func:`naflex_size` (sides
    multiples of the patch, at most ``max_tokens`` patches).

    Args:
        patch_size: the backbone's patch.
        max_tokens: the token budget per image.
        max_ratio: the largest scale (``None``: any).
        interpolation: mmcv's (``'bicubic'`` as timm's default).

    Sets ``img``, ``img_shape`` and ``scale_factor`` ``(w'/w, h'/h)``.
    """

    def __init__(self, patch_size: Union[int, Sequence[int]] = 16,
                 max_tokens: int = 256, max_ratio: Optional[float] = None,
                 interpolation: str = 'bicubic'):
        self.patch_size, self.max_tokens = _pair(patch_size), max_tokens
        self.max_ratio, self.interpolation = max_ratio, interpolation

    def transform(self, results: dict) -> dict:
        img = results['img']
        h, w = img.shape[:2]
        size = naflex_size((h, w), self.patch_size, self.max_tokens,
                           self.max_ratio)
        results['img'] = mmcv.imresize(img, size[::-1],
                                       interpolation=self.interpolation)
        results['img_shape'] = size
        results['scale_factor'] = (size[1] / w, size[0] / h)
        return results

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(patch_size={self.patch_size}, '
                f'max_tokens={self.max_tokens}, max_ratio={self.max_ratio},'
                f' interpolation={self.interpolation!r})')


@TRANSFORMS.register_module()
class NaFlexRandomResizedCrop(NaFlexResize):
    """A random crop of ``scale`` of the image's area at an aspect ratio
    drawn log-uniformly from ``ratio`` (width / height, as torchvision's
    ``RandomResizedCrop``; 10 tries, then the whole image), resized as
    :class:`NaFlexResize` (the idea of timm's
    ``RandomResizedCropToSequence``): views of many aspect ratios, each
    at its own, from square images too. Draws from numpy's global
    generator."""

    def __init__(self, patch_size=16, max_tokens: int = 256,
                 scale: Sequence[float] = (0.08, 1.),
                 ratio: Sequence[float] = (3 / 4, 4 / 3), **kwargs):
        super().__init__(patch_size, max_tokens, **kwargs)
        self.scale, self.ratio = tuple(scale), tuple(ratio)

    def crop_box(self, h: int, w: int) -> Tuple[int, int, int, int]:
        """``(y, x, ch, cw)`` of the crop."""
        log_ratio = np.log(self.ratio)
        for _ in range(10):
            area = h * w * np.random.uniform(*self.scale)
            aspect = np.exp(np.random.uniform(*log_ratio))
            cw = int(round(np.sqrt(area * aspect)))
            ch = int(round(np.sqrt(area / aspect)))
            if 0 < cw <= w and 0 < ch <= h:
                return (np.random.randint(0, h - ch + 1),
                        np.random.randint(0, w - cw + 1), ch, cw)
        return 0, 0, h, w

    def transform(self, results: dict) -> dict:
        img = results['img']
        y, x, ch, cw = self.crop_box(*img.shape[:2])
        results['img'] = img[y:y + ch, x:x + cw]
        return super().transform(results)


@TRANSFORMS.register_module()
class NaFlexPatchify(BaseTransform):
    """``img`` -> ``naflex = dict(patches, patch_coord)`` (:func:`patchify`)
    and ``patch_hw``, the grid ``(h, w)``; ``img`` is dropped. A list of
    views (mmpretrain's ``MultiView``, e.g. DINOv2's crops, each at its
    NaFlex size) gives a list of each."""

    def __init__(self, patch_size: Union[int, Sequence[int]] = 16):
        self.patch_size = _pair(patch_size)

    def transform(self, results: dict) -> dict:
        img = results.pop('img')
        views = img if isinstance(img, list) else [img]
        naflex = [dict(zip(('patches', 'patch_coord'),
                           patchify(view, self.patch_size)))
                  for view in views]
        grids = [(view.shape[0] // self.patch_size[0],
                  view.shape[1] // self.patch_size[1]) for view in views]
        single = not isinstance(img, list)
        results['naflex'] = naflex[0] if single else naflex
        results['patch_hw'] = grids[0] if single else grids
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(patch_size={self.patch_size})'


@TRANSFORMS.register_module()
class PackNaFlexInputs(PackInputs):
    """:class:`~mmpretrain.datasets.PackInputs` whose ``inputs`` is
    :class:`NaFlexPatchify`'s dict as tensors (``input_key='naflex'``;
    ``patch_hw`` joins the meta keys)."""

    def __init__(self, input_key: str = 'naflex',
                 meta_keys=('sample_idx', 'img_path', 'ori_shape',
                            'img_shape', 'scale_factor', 'flip',
                            'flip_direction', 'patch_hw'), **kwargs):
        super().__init__(input_key=input_key, meta_keys=meta_keys, **kwargs)

    @staticmethod
    def format_input(input_: Union[dict, list]) -> Union[dict, list]:
        if isinstance(input_, list):  # views
            return [PackNaFlexInputs.format_input(view) for view in input_]
        return {k: torch.from_numpy(np.ascontiguousarray(v))
                for k, v in input_.items()}
