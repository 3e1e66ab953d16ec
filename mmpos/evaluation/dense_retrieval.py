"""In-context dense retrieval ("Hummingbird" evaluation of Balazevic et al.,
"Towards In-context Scene Understanding", NeurIPS 2023; settings of the Open Hummingbird reproduction,
``vpariza/open-hummingbird-eval`` ``hbird/hbird_eval.py``):

* memory bank: the L2-normalised patch features of the training images,
  each with its patch label -- the class distribution of the patch's
  pixels (fraction of each class, :func:`patch_label_distribution`);
* each validation patch takes its ``k = 30`` nearest memory patches
  (cosine similarity ``s_i``) and predicts the label distribution
  ``sum_i softmax(s / T)_i y_i`` with ``T = 0.02`` (:func:`retrieve_labels`);
* the patch-level distributions are upsampled bilinearly to the label
  map, the argmax is the prediction, scored by mmseg's ``IoUMetric``
  (mIoU in percent, :func:`miou`).

No parameter is trained. Difference from Open Hummingbird: ignored pixels
(255, ADE20K's "other" after ``reduce_zero_label``) are left out of the patch
label distributions (a patch with no labelled pixel stays out of the memory)
instead of being counted as class 0; Open Hummingbird's optional memory
subsampling and augmentation epochs are not implemented (the whole training
set, unaugmented, is the memory).
"""
from typing import Dict, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from mmpos.utils.errors import BadInputError


def patch_label_distribution(labels: Tensor, grid_hw: Sequence[int],
                             num_classes: int,
                             ignore_index: int = 255) -> Tuple[Tensor, Tensor]:
    """Class distribution of the pixels of each patch.

    Args:
        labels: ``(N, H, W)`` integer labels, ``H``, ``W`` multiples of the
            grid's ``h``, ``w``.
        grid_hw: the patch grid ``(h, w)``.

    Returns:
        ``(dist (N, h, w, num_classes), valid (N, h, w))``: the fraction of
        the patch's labelled pixels in each class, and whether it has any.
    """
    height, width = labels.shape[-2:]
    h, w = grid_hw
    if height % h or width % w:
        raise BadInputError(f'labels of {height}x{width} do not tile into a '
                            f'{h}x{w} patch grid')
    labels = labels.long()
    bad = (labels != ignore_index) & ((labels < 0) | (labels >= num_classes))
    if bad.any():
        raise BadInputError(f'label {int(labels[bad][0])} outside [0, '
                            f'{num_classes}) and not ignore_index '
                            f'{ignore_index}')
    valid = labels != ignore_index
    onehot = F.one_hot(torch.where(valid, labels, 0), num_classes).float()
    onehot = onehot * valid[..., None]
    counts = F.avg_pool2d(onehot.permute(0, 3, 1, 2),
                          (height // h, width // w)).permute(0, 2, 3, 1)
    total = counts.sum(-1)
    return counts / total.clamp(min=1e-12)[..., None], total > 0


def memory_bank(feats: Tensor, dist: Tensor,
                valid: Tensor) -> Tuple[Tensor, Tensor]:
    """Memory of the labelled patches: normalised features ``(P, C)`` and
    label distributions ``(P, K)`` from patch maps ``(N, C, h, w)`` and
    :func:`patch_label_distribution`'s output."""
    flat = feats.float().permute(0, 2, 3, 1)[valid]
    return F.normalize(flat, dim=1), dist[valid]


def retrieve_labels(query: Tensor, memory_feats: Tensor,
                    memory_labels: Tensor, k: int = 30,
                    temperature: float = 0.02,
                    chunk: int = 4096) -> Tensor:
    """Label distribution of each query patch from its ``k`` nearest memory
    patches, weighted by ``softmax(cosine / temperature)``.

    Args:
        query: patch features ``(N, C, h, w)``.
        memory_feats: ``(P, C)`` (normalised).
        memory_labels: ``(P, K)`` label distributions.

    Returns:
        ``(N, K, h, w)`` predicted label distributions.
    """
    if k < 1 or temperature <= 0:
        raise BadInputError(f'k must be >= 1 and temperature > 0, got k={k},'
                            f' temperature={temperature}')
    n, _, h, w = query.shape
    flat = F.normalize(query.float().permute(0, 2, 3, 1).reshape(
        n * h * w, -1), dim=1)
    k = min(k, memory_feats.shape[0])
    out = []
    for start in range(0, flat.shape[0], chunk):
        sims, idx = (flat[start:start + chunk] @ memory_feats.T).topk(k, 1)
        weights = (sims / temperature).softmax(dim=1)
        out.append(torch.einsum('qk,qkc->qc', weights, memory_labels[idx]))
    return torch.cat(out).reshape(n, h, w, -1).permute(0, 3, 1, 2)


def predict_labels(label_dist: Tensor, size: Sequence[int]) -> Tensor:
    """Argmax ``(N, H, W)`` of label distributions ``(N, K, h, w)``
    upsampled bilinearly to ``size``."""
    return F.interpolate(label_dist, size=tuple(size), mode='bilinear',
                         align_corners=False).argmax(dim=1)


def miou(pred: Tensor, gt: Tensor, classes: Sequence[str],
         ignore_index: int = 255) -> Dict[str, float]:
    """mmseg's ``IoUMetric`` of label maps ``(N, H, W)``: ``mIoU``,
    ``mAcc``, ``aAcc`` in percent (classes absent from both prediction and
    ground truth do not count)."""
    from mmengine.logging import MMLogger
    from mmseg.evaluation.metrics import IoUMetric
    if pred.shape != gt.shape:
        raise BadInputError(f'predicted labels {tuple(pred.shape)} vs ground '
                            f'truth {tuple(gt.shape)}')
    metric = IoUMetric(ignore_index=ignore_index)
    metric.dataset_meta = dict(classes=tuple(classes))
    metric.process({}, [dict(pred_sem_seg=dict(data=p[None]),
                             gt_sem_seg=dict(data=g[None].long()))
                        for p, g in zip(pred, gt)])
    MMLogger.get_instance('mmpos')  # IoUMetric logs its table there
    return metric.compute_metrics(metric.results)


def hummingbird_miou(train_feats: Tensor, train_labels: Tensor,
                     val_feats: Tensor, val_labels: Tensor,
                     classes: Sequence[str], k: int = 30,
                     temperature: float = 0.02, ignore_index: int = 255,
                     return_pred: bool = False):
    """The whole evaluation: memory from ``train_feats`` ``(N, C, h, w)``
    and ``train_labels`` ``(N, H, W)``, predictions for ``val_feats``,
    scored against ``val_labels``. Returns :func:`miou`'s dict (and the
    predicted labels ``(M, H, W)`` with ``return_pred``)."""
    dist, valid = patch_label_distribution(
        train_labels, train_feats.shape[-2:], len(classes), ignore_index)
    memory = memory_bank(train_feats, dist, valid)
    if not memory[0].shape[0]:
        raise BadInputError('no labelled training patch for the memory')
    pred = predict_labels(retrieve_labels(val_feats, *memory, k=k,
                                          temperature=temperature),
                          val_labels.shape[-2:])
    metrics = miou(pred, val_labels, classes, ignore_index)
    return (metrics, pred) if return_pred else metrics


# ``retrieval_probe`` of a probe config.
RETRIEVAL_PROBE = dict(size=512, k=30, temperature=0.02)


def seg_data(dataset_cfg: dict, size):
    """``(image paths, labels (N, h, w) long, classes, ignore_index)`` of an
    mmseg segmentation dataset config, labels read by mmseg's
    ``LoadAnnotations`` (the dataset's ``reduce_zero_label``) and resized
    (nearest) to ``size``."""
    from .dense import dataset_files, image_size, read_label_maps, resize_maps
    infos, meta = dataset_files(dataset_cfg, 'seg_map_path')
    labels = resize_maps(read_label_maps(infos), image_size(size),
                         torch.long)
    ignore = infos[0].get('ignore_index', 255)
    return [i['img_path'] for i in infos], labels, tuple(
        meta['classes']), ignore


def seg_split(cfg, split: str, size, data_root: Optional[str] = None):
    """:func:`seg_data` of a probe config's ``train`` / ``val`` split."""
    from .dense import probe_dataset
    return seg_data(probe_dataset(cfg, split, data_root), size)
