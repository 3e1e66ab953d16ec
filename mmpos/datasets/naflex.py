"""NaFlex batches: the collate that pads per-image patch sequences to the
batch's longest (no packing of several images into one sequence) and the
data preprocessor that normalises their pixels.

A batch is timm's NaFlex dict, which the backbone's ``forward`` takes as it
stands (:meth:`~mmpos.models.backbones.RoPEVisionTransformer.forward_naflex`):

* ``patches`` ``(B, N, p p c)``: pixels, each patch ``(row, column,
  channel)``; padding zeros;
* ``patch_coord`` ``(B, N, 2)`` long: ``(y, x)`` in the image's grid;
  padding ``(0, 0)``;
* ``patch_valid`` ``(B, N)`` bool: ``False`` for padding.
"""
from typing import List, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from mmengine.model import BaseDataPreprocessor
from mmengine.registry import FUNCTIONS
from torch import Tensor

from mmpos.registry import MODELS
from .transforms.naflex import patchify


def pad_naflex(samples: Sequence[dict], pad_to: Optional[int] = None) -> dict:
    """``[dict(patches (n_i, D), patch_coord (n_i, 2)), ...]`` -> the NaFlex
    dict of the module docstring, ``N = max n_i`` (or ``pad_to``, at least
    that: one shape for every batch)."""
    lengths = [s['patches'].shape[0] for s in samples]
    N = max(lengths) if pad_to is None else pad_to
    if N < max(lengths):
        raise ValueError(f'pad_to={pad_to} is shorter than the longest '
                         f'sequence of the batch ({max(lengths)} patches)')
    first = samples[0]['patches']
    B, D = len(samples), first.shape[1]
    patches = first.new_zeros(B, N, D)
    coord = torch.zeros(B, N, 2, dtype=torch.long)
    valid = torch.zeros(B, N, dtype=torch.bool)
    for i, (sample, n) in enumerate(zip(samples, lengths)):
        patches[i, :n] = sample['patches']
        coord[i, :n] = sample['patch_coord']
        valid[i, :n] = True
    return dict(patches=patches, patch_coord=coord, patch_valid=valid)


def naflex_batch(images: Sequence[np.ndarray], patch_size,
                 pad_to: Optional[int] = None) -> dict:
    """Arrays ``(H, W, c)`` of their own sizes (sides multiples of the
    patch), e.g. already resized by ``NaFlexResize``, -> a padded NaFlex
    batch (:func:`~mmpos.datasets.transforms.patchify` each, then
    :func:`pad_naflex`), pixels as they are."""
    samples = []
    for img in images:
        patches, coord = patchify(img, patch_size)
        samples.append(dict(patches=torch.from_numpy(patches),
                            patch_coord=torch.from_numpy(coord)))
    return pad_naflex(samples, pad_to)


def cat_naflex(batches: Sequence[dict]) -> dict:
    """Padded NaFlex batches (e.g. the views of a multi-crop batch) -> one
    batch of all their samples, each padded to the longest sequence."""
    N = max(b['patches'].shape[1] for b in batches)
    out = {}
    for key in ('patches', 'patch_coord', 'patch_valid'):
        out[key] = torch.cat([
            F.pad(b[key], (0, 0) * (b[key].dim() - 2) +
                  (0, N - b[key].shape[1])) for b in batches])
    return out


@FUNCTIONS.register_module()
def naflex_collate(data_batch: Sequence[dict],
                   pad_to: Optional[int] = None) -> dict:
    """Collate of NaFlex samples (``inputs`` from
    :class:`~mmpos.datasets.transforms.PackNaFlexInputs`): ``inputs`` padded
    by :func:`pad_naflex`, ``data_samples`` the list of the samples' (as
    mmengine's ``default_collate`` leaves them); samples of several views
    (a list each) give a list of padded views. Config:
    ``collate_fn=dict(type='naflex_collate')``."""
    inputs = [d['inputs'] for d in data_batch]
    if isinstance(inputs[0], list):
        padded = [pad_naflex(view, pad_to) for view in zip(*inputs)]
    else:
        padded = pad_naflex(inputs, pad_to)
    return dict(inputs=padded,
                data_samples=[d['data_samples'] for d in data_batch])


def padding_fraction(patch_valid: Tensor) -> float:
    """The fraction of a padded batch's tokens that are padding."""
    return 1. - patch_valid.float().mean().item()


@MODELS.register_module()
class NaFlexDataPreprocessor(BaseDataPreprocessor):
    """Normalise the pixels of a NaFlex batch per channel, ``(x - mean) /
    std`` after an optional BGR -> RGB swap (as mmpretrain's image data
    preprocessor does to whole images), and move it to the model's device.
    Padding stays finite (it is masked out in the backbone). A batch of
    whole images of one size (``(B, c, H, W)`` or a list of ``(c, H, W)``,
    mmengine's ``default_collate`` / ``pseudo_collate``) is normalised
    likewise and stays a batch of images.

    Args:
        mean, std: per channel.
        to_rgb: swap the channel order (images loaded BGR by mmcv).
        batch_augments: must be ``None`` (mmpretrain's ``ImageClassifier``
            passes its ``train_cfg`` here); Mixup / CutMix of whole images
            are not defined on NaFlex batches.
    """

    def __init__(self, mean: Sequence[float] = (0., 0., 0.),
                 std: Sequence[float] = (1., 1., 1.), to_rgb: bool = False,
                 batch_augments: Optional[dict] = None):
        super().__init__()
        if batch_augments:
            raise ValueError('NaFlexDataPreprocessor: batch augments '
                             f'{batch_augments} (Mixup / CutMix of whole '
                             'images) are not defined on NaFlex batches')
        if len(mean) != len(std):
            raise ValueError(f'mean {tuple(mean)} and std {tuple(std)} need '
                             'one value per channel each')
        self.register_buffer('mean', torch.tensor(mean, dtype=torch.float32),
                             persistent=False)
        self.register_buffer('std', torch.tensor(std, dtype=torch.float32),
                             persistent=False)
        self.to_rgb = to_rgb

    def forward(self, data: dict, training: bool = False) -> dict:
        data = self.cast_data(data)
        if isinstance(data['inputs'], list) and data['inputs'] and \
                isinstance(data['inputs'][0], dict):  # views
            return dict(inputs=[self.normalise(view)
                                for view in data['inputs']],
                        data_samples=data.get('data_samples'))
        if not isinstance(data['inputs'], dict):  # whole images, one size
            images = data['inputs']
            images = torch.stack(images) if isinstance(
                images, (list, tuple)) else images
            images = images.float().flip(-3) if self.to_rgb else \
                images.float()
            images = (images - self.mean[:, None, None]) / \
                self.std[:, None, None]
            return dict(inputs=images, data_samples=data.get('data_samples'))
        return dict(inputs=self.normalise(data['inputs']),
                    data_samples=data.get('data_samples'))

    def normalise(self, inputs: dict) -> dict:
        """One padded NaFlex batch with its patches normalised."""
        inputs = dict(inputs)
        c = self.mean.numel()
        pixels = inputs['patches'].float().unflatten(-1, (-1, c))
        if self.to_rgb:  # (B, N, p p, c)
            pixels = pixels.flip(-1)
        inputs['patches'] = ((pixels - self.mean) / self.std).flatten(-2)
        return inputs


__all__: List[str] = [
    'NaFlexDataPreprocessor', 'cat_naflex', 'naflex_batch', 'naflex_collate',
    'pad_naflex', 'padding_fraction'
]
