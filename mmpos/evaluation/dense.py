"""Patch features of a frozen backbone for the dense probes
(:mod:`.depth_probe`, :mod:`.correspondence`, :mod:`.dense_retrieval`), and
the images and per-pixel targets of an mmseg dataset config.

Features come from :func:`mmpos.apis.features.extract_features`, so every
backbone :func:`mmpos.apis.init_backbone` builds works: one entry per
``out_indices`` block, each with the patch-token map ``(N, C, h, w)`` and the
class token ``(N, C)`` (``None`` for backbones without one).
"""
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from mmpos.apis.features import extract_features
from mmpos.errors import BadInputError, UnsupportedModelError
from .frozen import load_inputs, with_progress


@torch.no_grad()
def dense_features(backbone, inputs: Tensor, batch_size: int = 32,
                   device='cpu', progress: Optional[bool] = None
                   ) -> Dict[str, List[Optional[Tensor]]]:
    """Patch tokens and class tokens of every output of ``backbone``.

    Args:
        inputs: preprocessed images ``(N, 3, H, W)``.
        progress: a bar over the batches
            (:func:`~mmpos.evaluation.frozen.with_progress`).

    Returns:
        dict: ``patch``: per output block ``(N, C, h, w)``; ``cls``: per
        output block ``(N, C)`` or ``None``; float32, on the CPU.
    """
    patch: List[List[Tensor]] = []
    cls: List[List[Tensor]] = []
    for start in with_progress(range(0, inputs.shape[0], batch_size),
                               progress):
        layers = extract_features(
            backbone, inputs[start:start + batch_size].to(device))['layers']
        if not patch:
            patch, cls = [[] for _ in layers], [[] for _ in layers]
        for i, layer in enumerate(layers):
            if layer['patch_tokens'] is None:
                raise UnsupportedModelError(
                    f'{type(backbone).__name__}: output {i} has no patch '
                    'tokens (the dense probes need a token or map output)')
            patch[i].append(layer['patch_tokens'].float().cpu())
            if layer['cls_token'] is not None:
                cls[i].append(layer['cls_token'].float().cpu())
    return dict(patch=[torch.cat(p) for p in patch],
                cls=[torch.cat(c) if c else None for c in cls])


def last_blocks(backbone, num: int) -> Tuple[int, ...]:
    """``out_indices`` of the last ``num`` blocks of a ViT-like backbone
    (DINOv2's depth probe: 1 or 4 blocks); for 4 blocks of a ``L``-block
    ViT, blocks ``L/4 - 1, L/2 - 1, 3L/4 - 1, L - 1`` (DINOv2 ViT-S/B:
    2, 5, 8, 11)."""
    depth = getattr(backbone, 'num_layers', None)
    if depth is None:
        raise UnsupportedModelError(
            f'{type(backbone).__name__}: has no num_layers; give the blocks '
            '(out_indices) explicitly')
    if num == 1:
        return (depth - 1, )
    if num < 1 or depth % num:
        raise BadInputError(f'{num} evenly spaced blocks of a {depth}-block '
                            'backbone do not exist')
    return tuple(depth // num * (i + 1) - 1 for i in range(num))


def dataset_files(dataset_cfg: dict, key: str) -> Tuple[List[dict], dict]:
    """``(data infos, metainfo)`` of an mmseg dataset config (its pipeline
    is ignored); every info has ``img_path`` and ``key`` (``seg_map_path``
    or ``depth_map_path``). The default registry scope is left as it
    was."""
    import mmpos.datasets  # noqa: F401  (registers mmpos' transforms)
    from mmengine.registry import DefaultScope
    from mmseg.registry import DATASETS
    with DefaultScope.overwrite_default_scope('mmseg'):  # and back after
        dataset = DATASETS.build(dict(dataset_cfg, pipeline=[]))
    infos = [dataset.get_data_info(i) for i in range(len(dataset))]
    if not infos:
        raise BadInputError(f'dataset {dataset_cfg} is empty')
    missing = [info['img_path'] for info in infos if not info.get(key)]
    if missing:
        raise BadInputError(f'{missing[0]}: no {key} in dataset '
                            f'{dataset_cfg.get("type")}')
    return infos, dict(dataset.metainfo)


def read_label_maps(infos: Sequence[dict]) -> List[np.ndarray]:
    """Semantic label maps of mmseg data infos, through mmseg's
    ``LoadAnnotations`` (``reduce_zero_label`` as the dataset says)."""
    from mmseg.datasets.transforms import LoadAnnotations
    load = LoadAnnotations()
    return [load(dict(info, seg_fields=[]))['gt_seg_map'] for info in infos]


def read_depth_maps(infos: Sequence[dict],
                    depth_rescale_factor: float = 1e-3) -> List[np.ndarray]:
    """Depth maps (metres, float32) of mmseg data infos, through mmseg's
    ``LoadDepthAnnotation`` (NYU: uint16 PNGs in millimetres, factor
    ``1e-3``)."""
    from mmseg.datasets.transforms import LoadDepthAnnotation
    load = LoadDepthAnnotation(depth_rescale_factor=depth_rescale_factor)
    return [load(dict(info))['gt_depth_map'] for info in infos]


def resize_maps(maps: Sequence[np.ndarray], size: Tuple[int, int],
                dtype=torch.float32) -> Tensor:
    """Per-pixel targets resized (nearest: labels and depths keep their
    values) to ``size = (h, w)``, stacked to ``(N, h, w)``."""
    out = [F.interpolate(torch.from_numpy(np.asarray(m, np.float32))[None,
                                                                     None],
                         size=size, mode='nearest')[0, 0] for m in maps]
    return torch.stack(out).to(dtype)


def split_features(backbone, paths: Sequence[str], size, mean, std,
                   batch_size: int = 32, device='cpu',
                   progress: Optional[bool] = None
                   ) -> Dict[str, List[Optional[Tensor]]]:
    """:func:`dense_features` of image files, read and preprocessed
    (:func:`mmpos.evaluation.frozen.load_inputs`, resized to ``size``) one
    batch at a time; ``progress``: a bar over the batches
    (:func:`~mmpos.evaluation.frozen.with_progress`)."""
    parts = [dense_features(backbone, load_inputs(
        paths[start:start + batch_size], size, mean, std), batch_size,
                            device)
             for start in with_progress(range(0, len(paths), batch_size),
                                        progress)]
    if not parts:
        raise BadInputError('no image to extract features from')
    return {key: [None if parts[0][key][i] is None else torch.cat(
        [p[key][i] for p in parts]) for i in range(len(parts[0][key]))]
            for key in ('patch', 'cls')}


def image_size(size) -> Tuple[int, int]:
    """``(h, w)`` of an int or a pair."""
    return (size, size) if isinstance(size, int) else tuple(size)


def probe_dataset(cfg, split: str, data_root: Optional[str] = None) -> dict:
    """``<split>_dataloader.dataset`` of a probe config (``data_root``
    replaced where given), recursing into dataset wrappers."""
    loader = cfg.get(f'{split}_dataloader')
    if not loader or 'dataset' not in loader:
        raise BadInputError(f'{cfg.filename}: no {split}_dataloader.dataset')
    dataset = dict(loader['dataset'])
    while 'dataset' in dataset:  # RepeatDataset and co.
        dataset = dict(dataset['dataset'])
    if data_root:
        dataset['data_root'] = data_root
    return dataset


def probe_settings(cfg, key: str, defaults: dict, **overrides) -> dict:
    """``cfg[key]`` over ``defaults``, then the non-``None``
    ``overrides``; unknown keys are an error naming the config."""
    settings = dict(defaults)
    given = dict(cfg.get(key) or {})
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise BadInputError(f'{cfg.filename}: unknown {key} settings '
                            f'{unknown} (known: {sorted(defaults)})')
    settings.update(given)
    settings.update({k: v for k, v in overrides.items() if v is not None})
    return settings


def probe_backbone(config, checkpoint: Optional[str], blocks: int = 1,
                   device='cpu', prefix: str = 'backbone.'):
    """:func:`mmpos.apis.init_backbone` with the last ``blocks`` blocks out
    (:func:`last_blocks`); ``checkpoint`` ``None`` or ``'none'``: random
    init."""
    from mmpos.apis import init_backbone
    checkpoint = None if checkpoint in (None, 'none') else checkpoint
    first = init_backbone(config, checkpoint, device, prefix=prefix)
    if blocks == 1 and list(getattr(first, 'out_indices', [])) == [
            getattr(first, 'num_layers', 0) - 1]:
        return first
    return init_backbone(config, checkpoint, device, prefix=prefix,
                         out_indices=last_blocks(first, blocks))
