"""Image-level features of a frozen backbone over a labelled dataset, and the
result files of frozen-feature evaluations.

Datasets are any mmpretrain classification dataset config (``ImageNet``,
``CustomDataset`` folders, ...): only their file list and labels are used
(``get_data_info(i)['img_path']`` / ``['gt_label']``); images are read and
preprocessed by :func:`mmpos.apis.features.preprocess`, the same for every
backbone.

Result files (``write_result``), read by the table regenerator
(``tools/paper_tables/gen_tables.py`` takes ``metrics.json`` as the
finished result of a work dir): ``<work_dir>/metrics.json`` (flat
``{name: value}``) and ``<work_dir>/result.md`` (the same as a table, with
the settings), each written atomically (a killed evaluation leaves no
partial file).

Loops over many batches or steps (feature extraction, a probe's training)
show mmengine's progress bar (:func:`with_progress`).
"""
import json
import os
import os.path as osp
import sys
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import torch
from mmengine.utils import track_iter_progress
from torch import Tensor

from mmpos.apis.features import (extract_features, image_features,
                                 preprocess, read_images)
from mmpos.checkpoint import write_atomically
from mmpos.errors import BadInputError


#: a loop of at least this many batches or steps shows a progress bar when
#: not told otherwise (``progress=None``): about 10 s of a ViT-S on a CPU
#: at 64 images a batch; a test's or a hook's few batches stay silent
PROGRESS_MIN_STEPS = 10


def with_progress(steps: Sequence, progress: Optional[bool] = None
                  ) -> Iterable:
    """``steps``, through mmengine's progress bar on stdout
    (:func:`~mmengine.utils.track_iter_progress`) when ``progress`` is
    True, or None and there are at least :data:`PROGRESS_MIN_STEPS`."""
    if progress is None:
        progress = len(steps) >= PROGRESS_MIN_STEPS
    return track_iter_progress(steps, file=sys.stdout) if progress \
        else steps


def dataset_items(dataset_cfg: dict) -> Tuple[List[str], Tensor, tuple]:
    """``(image paths, labels (N,), class names)`` of an mmpretrain dataset
    config (its ``pipeline`` is ignored)."""
    import mmpos.datasets  # noqa: F401  (registers mmpos' transforms)
    from mmengine.registry import init_default_scope
    from mmpretrain.registry import DATASETS
    init_default_scope('mmpretrain')
    dataset = DATASETS.build(dict(dataset_cfg, pipeline=[]))
    infos = [dataset.get_data_info(i) for i in range(len(dataset))]
    if not infos:
        raise BadInputError(f'dataset {dataset_cfg} is empty')
    if any('gt_label' not in info for info in infos):
        raise BadInputError(
            f'dataset {dataset_cfg} has no labels (gt_label)')
    labels = torch.tensor([int(info['gt_label']) for info in infos])
    return [info['img_path'] for info in infos], labels, tuple(
        dataset.CLASSES or ())


def load_inputs(paths: Sequence[str], size, mean, std,
                center_crop=None) -> Tensor:
    """Preprocessed images ``(N, 3, h, w)`` of ``paths``."""
    return preprocess(read_images(paths), size, mean, std, center_crop)


@torch.no_grad()
def batch_features(backbone, inputs: Tensor, batch_size: int = 64,
                   device='cpu', progress: Optional[bool] = None
                   ) -> Dict[str, Tensor]:
    """``{'cls': (N, C), 'avg': (N, C)}`` (what the backbone has, see
    :func:`mmpos.apis.features.image_features`) of preprocessed ``inputs``,
    on the CPU; ``progress``: a bar over the batches
    (:func:`with_progress`)."""
    parts: Dict[str, List[Tensor]] = {}
    for start in with_progress(range(0, inputs.shape[0], batch_size),
                               progress):
        feats = image_features(
            extract_features(backbone,
                             inputs[start:start + batch_size].to(device)))
        for name, value in feats.items():
            parts.setdefault(name, []).append(value.float().cpu())
    return {name: torch.cat(values) for name, values in parts.items()}


def write_markdown(path: str, title: str, metrics: Dict[str, float],
                   settings: Dict[str, object]) -> str:
    """``metrics`` and ``settings`` as two Markdown tables under ``title``."""
    lines = [f'# {title}', '', '| metric | value |', '| --- | --- |']
    lines += [f'| {k} | {v:.2f} |' for k, v in metrics.items()]
    lines += ['', '| setting | value |', '| --- | --- |']
    lines += [f'| {k} | {v} |' for k, v in settings.items()]
    write_atomically(('\n'.join(lines) + '\n').encode(), path)
    return path


def write_result(work_dir: str, metrics: Dict[str, float], title: str,
                 settings: Dict[str, object]) -> Tuple[str, str]:
    """Write ``metrics.json`` and ``result.md`` into ``work_dir``; returns
    their paths. Existing files are not overwritten (FileExistsError)."""
    os.makedirs(work_dir, exist_ok=True)
    json_path = osp.join(work_dir, 'metrics.json')
    md_path = osp.join(work_dir, 'result.md')
    for path in (json_path, md_path):
        if osp.exists(path):
            raise FileExistsError(f'{path} exists; choose another work dir')
    write_atomically(json.dumps(metrics, indent=1).encode(), json_path)
    return json_path, write_markdown(md_path, title, metrics, settings)
