"""In-context dense retrieval ("Hummingbird" evaluation of Balazevic et al.,
"Towards In-context Scene Understanding", NeurIPS 2023), with the settings
of the Open Hummingbird reproduction (``vpariza/open-hummingbird-eval``,
``hbird/hbird_eval.py``, ``hbird/utils/transforms.py``; the authors did not
release code), and its image-free baseline.

Protocol (Open Hummingbird's code, here in our own implementation):

* **memory bank** (:func:`augmented_memory`): ``augment_epochs`` passes
  over the training images (Open Hummingbird: ``augmentation_epoch``,
  default 1; its published VOC table uses 2), each image augmented
  (:func:`augment_view`: colour jitter of brightness, contrast, saturation
  and hue, each by up to 0.1 and each applied with probability 0.5, then a
  random resized crop of ``scale=(0.5, 2)``, ``ratio=(3/4, 4/3)`` of image
  and labels to the input size), every patch's L2-normalised feature stored
  with its patch label: the class distribution of its pixels
  (:func:`patch_label_distribution`). With ``memory_size`` (the paper's
  ``1024 * 10**4`` patches, the largest of Open Hummingbird's table, which
  also reports ``1024 * 10**2`` and ``10**3``; Open Hummingbird's default:
  none, every patch) each augmented image keeps
  ``memory_size // (images * epochs)`` patches, the patches of the image's
  rarer classes first (:func:`memory_patch_scores`,
  :func:`sample_memory_patches`);
* **retrieval** (:func:`retrieve_labels`): each validation patch takes its
  ``k = 30`` nearest memory patches by cosine similarity ``s_i`` and
  predicts ``sum_i softmax(s / T)_i y_i`` with ``T = 0.02``;
* **prediction**: the patch-level distributions are upsampled bilinearly to
  the label map (images and labels resized to the input size: 512 for patch
  16 or 8, 504 for patch 14), the argmax is the label;
* **score** (:func:`miou`): mmseg's ``IoUMetric`` (mIoU in percent).

Differences from Open Hummingbird's code
(``tests/evaluation/test_retrieval_reference.py`` runs both on the same
fixtures):

* ignored pixels (255; ADE20K's "other" after mmseg's
  ``reduce_zero_label``) are left out of the memory's patch labels and
  patch scores (a patch with no labelled pixel stays out of the memory);
  Open Hummingbird turns 255 into class 0 (VOC's background) and keeps
  ADE20K's "other" as a 151st class, ignored only when scoring;
* mIoU is mmseg's: labels are scored as predicted and classes absent from
  both prediction and ground truth are left out of the mean. Open
  Hummingbird's ``PredsmIoU`` first matches predicted to true classes with
  the Hungarian algorithm on the IoU matrix (an optimal permutation, the
  identity whenever predictions are right more often than swapped) and
  averages over all classes, an absent class counting as IoU 0. With every
  class present in the validation labels and the identity optimal, both
  give the same number;
* neighbours are exact (a brute-force top-k of the cosine); Open
  Hummingbird's default ScaNN search is approximate (its Faiss search is
  exact; both rank by the inner product with the unnormalised query, the
  same order);
* colour jitter, crop and resize run on PIL images in a fixed order per
  image drawn from its own random stream (seed, epoch, image index), so the
  memory does not depend on the batch size; images are resized bicubically
  (mmpos' :func:`~mmpos.apis.features.preprocess`), Open Hummingbird's
  validation images bilinearly.

On NaFlex features (``max_tokens``, :mod:`mmpos.evaluation.naflex`) every
image and augmented view is resized at its own aspect ratio to the largest
grid of at most ``max_tokens`` patches instead of to the square ``size``:
a view's crop keeps its aspect ratio, its labels are resized (nearest)
with it, and each validation image's labels are resized (nearest) to its
own NaFlex size, where the patch distributions are upsampled and scored
(the square probe resizes them to the square). The memory is the same
list of labelled patches, whatever their grids.

Image-free baseline (:func:`class_prior_miou`, :func:`class_prior_run`):
the training labels' class frequencies, per pixel of the resized label map
(default) or over the whole image, predict their argmax for every
validation image, scored by the same :func:`miou`. The per-pixel prior is
the default, the stronger of the two where they differ (measured at 64 px
with 256 training images: mini-scenes 9.30 mIoU both, background
everywhere; mini-stuff 5.59 vs 2.07 and mini-ADE 6.23 vs 2.74 on 32
validation images). It predicts by position where position tells
something (ADE20K's sky above, floor below); where it tells nothing
(mini-stuff) the per-pixel argmax of a finite training set still varies
over the image and scores above the single majority class, a baseline at
least as hard to beat.
"""
import functools
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from mmpos.errors import BadInputError

# Open Hummingbird's training (memory) augmentation
# (``get_hbird_train_transforms``): image-only colour jitter, each factor
# drawn in [1 - r, 1 + r] (hue: a shift in [-r, r] of the hue circle) and
# each applied with probability ``jitter_prob``, then a random resized crop
# (torchvision's ``RandomResizedCrop`` rule) of image and labels together.
HBIRD_AUGMENT = dict(brightness=0.1, contrast=0.1, saturation=0.1, hue=0.1,
                     jitter_prob=0.5, scale=(0.5, 2.0), ratio=(3 / 4, 4 / 3))


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


def memory_patch_scores(dist: Tensor, valid: Tensor) -> Tensor:
    """Open Hummingbird's patch scores for a bounded memory
    (``_sample_features``): per image, the number of its patches containing
    each class; a patch's score is the sum of that number over the classes
    it contains (low: a patch of the image's rarer classes).

    Args:
        dist, valid: :func:`patch_label_distribution`'s ``(N, h, w, K)``
            and ``(N, h, w)``.

    Returns:
        ``(N, h * w)`` scores, ``inf`` for patches without a labelled pixel.
    """
    present = (dist > 0).flatten(1, 2).float()  # (N, h * w, K)
    per_image = present.sum(1)  # patches of the image containing each class
    scores = torch.einsum('npk,nk->np', present, per_image)
    return scores.masked_fill(~valid.flatten(1), float('inf'))


def sample_memory_patches(dist: Tensor, valid: Tensor, num: int,
                          rngs: Sequence[np.random.Generator]) -> Tensor:
    """The ``num`` patches of each image that a bounded memory keeps: the
    smallest :func:`memory_patch_scores` times a uniform ``[0, 1)`` draw
    (image ``i``'s from ``rngs[i]``), among its labelled patches (all of
    them if it has at most ``num``). Returns the kept patches as a mask
    ``(N, h, w)``."""
    scores = memory_patch_scores(dist, valid)
    noise = torch.from_numpy(np.stack(
        [rng.random(scores.shape[1]) for rng in rngs])).float()
    ranked = (scores * noise).masked_fill(~valid.flatten(1), float('inf'))
    keep = torch.zeros_like(ranked, dtype=torch.bool)
    order = ranked.argsort(dim=1, stable=True)[:, :num]
    keep.scatter_(1, order, True)
    return (keep & valid.flatten(1)).view_as(valid)


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


def miou(pred: Union[Tensor, Sequence[Tensor]],
         gt: Union[Tensor, Sequence[Tensor]], classes: Sequence[str],
         ignore_index: int = 255) -> Dict[str, float]:
    """mmseg's ``IoUMetric`` of label maps ``(N, H, W)``, or of lists of
    ``(H_i, W_i)`` maps (NaFlex): ``mIoU``, ``mAcc``, ``aAcc`` in percent,
    rounded to 2 decimals (pixels labelled ``ignore_index`` do not count;
    classes absent from both prediction and ground truth are left out of
    the means)."""
    from mmengine.logging import MMLogger
    from mmseg.evaluation.metrics import IoUMetric
    if len(pred) != len(gt) or any(p.shape != g.shape
                                   for p, g in zip(pred, gt)):
        raise BadInputError(
            f'predicted labels {[tuple(p.shape) for p in pred][:3]} vs '
            f'ground truth {[tuple(g.shape) for g in gt][:3]} '
            f'({len(pred)} vs {len(gt)} maps)')
    metric = IoUMetric(ignore_index=ignore_index)
    metric.dataset_meta = dict(classes=tuple(classes))
    metric.process({}, [dict(pred_sem_seg=dict(data=p[None]),
                             gt_sem_seg=dict(data=g[None].long()))
                        for p, g in zip(pred, gt)])
    MMLogger.get_instance('mmpos')  # IoUMetric logs its table there
    return metric.compute_metrics(metric.results)


def retrieval_miou(memory: Tuple[Tensor, Tensor],
                   val_feats: Union[Tensor, Sequence[Tensor]],
                   val_labels: Union[Tensor, Sequence[Tensor]],
                   classes: Sequence[str], k: int = 30,
                   temperature: float = 0.02, ignore_index: int = 255,
                   return_pred: bool = False):
    """Predictions for ``val_feats`` ``(M, C, h, w)`` from a memory
    ``(features (P, C), label distributions (P, K))``, scored against
    ``val_labels`` ``(M, H, W)``; on NaFlex features, lists of ``M`` maps
    ``(C, h_i, w_i)`` and labels ``(H_i, W_i)``, each image's distributions
    upsampled to its own labels. Returns :func:`miou`'s dict (and the
    predicted labels, ``(M, H, W)`` or a list, with ``return_pred``)."""
    if not memory[0].shape[0]:
        raise BadInputError('no labelled training patch for the memory')
    if isinstance(val_feats, Tensor):
        pred = predict_labels(retrieve_labels(val_feats, *memory, k=k,
                                              temperature=temperature),
                              val_labels.shape[-2:])
    else:
        pred = [predict_labels(retrieve_labels(
            feats[None], *memory, k=k, temperature=temperature),
                               labels.shape)[0]
                for feats, labels in zip(val_feats, val_labels)]
    metrics = miou(pred, val_labels, classes, ignore_index)
    return (metrics, pred) if return_pred else metrics


def hummingbird_miou(train_feats: Union[Tensor, Sequence[Tensor]],
                     train_labels: Union[Tensor, Sequence[Tensor]],
                     val_feats: Union[Tensor, Sequence[Tensor]],
                     val_labels: Union[Tensor, Sequence[Tensor]],
                     classes: Sequence[str], k: int = 30,
                     temperature: float = 0.02, ignore_index: int = 255,
                     return_pred: bool = False):
    """The evaluation with an unaugmented memory (the online probe's): every
    patch of ``train_feats`` ``(N, C, h, w)`` with its labels from
    ``train_labels`` ``(N, H, W)``, then :func:`retrieval_miou`; on NaFlex
    features, lists of maps ``(C, h_i, w_i)`` and labels ``(H_i, W_i)``,
    each image's patches labelled from its own map."""
    if isinstance(train_feats, Tensor):
        pairs = [(train_feats, train_labels)]
    else:
        pairs = [(f[None], lab[None]) for f, lab in zip(train_feats,
                                                        train_labels)]
    parts = [memory_bank(f, *patch_label_distribution(
        lab, f.shape[-2:], len(classes), ignore_index)) for f, lab in pairs]
    memory = (torch.cat([m[0] for m in parts]),
              torch.cat([m[1] for m in parts]))
    return retrieval_miou(memory, val_feats, val_labels, classes, k,
                          temperature, ignore_index, return_pred)


def class_counts(labels: Tensor, num_classes: int,
                 ignore_index: int = 255) -> Tensor:
    """Labelled pixels of each class at each position, ``(K, H, W)``, of
    label maps ``(N, H, W)`` (``ignore_index`` not counted)."""
    n, h, w = labels.shape
    flat = labels.long().reshape(n, h * w)
    valid = flat != ignore_index
    if ((flat[valid] < 0) | (flat[valid] >= num_classes)).any():
        raise BadInputError(f'labels outside [0, {num_classes}) and not '
                            f'ignore_index {ignore_index}')
    counts = torch.zeros(num_classes, h * w)
    counts.scatter_add_(0, torch.where(valid, flat, 0), valid.float())
    return counts.view(num_classes, h, w)


def class_prior(counts: Tensor, per_pixel: bool = True) -> Tensor:
    """Class frequencies from :func:`class_counts` ``(K, H, W)``: per pixel
    ``(K, H, W)`` (a pixel never labelled takes the overall frequencies),
    or over all pixels ``(K, 1, 1)``."""
    overall = counts.sum((1, 2), keepdim=True)
    if not overall.sum():
        raise BadInputError('no labelled training pixel for the class prior')
    overall = overall / overall.sum()
    if not per_pixel:
        return overall
    total = counts.sum(0, keepdim=True)
    return torch.where(total > 0, counts / total.clamp(min=1), overall)


def prior_prediction(prior: Tensor, shape: Sequence[int]) -> Tensor:
    """The argmax of a :func:`class_prior` (ties: the lower class index),
    the same map for each of the ``shape = (M, H, W)`` predictions."""
    return prior.argmax(0).expand(*shape).contiguous()


def class_prior_miou(train_labels: Tensor, val_labels: Tensor,
                     classes: Sequence[str], ignore_index: int = 255,
                     per_pixel: bool = True, return_pred: bool = False):
    """Image-free baseline of the segmentation probes: the argmax of the
    :func:`class_prior` of ``train_labels`` ``(N, H, W)`` predicted for
    every map of ``val_labels`` ``(M, H, W)`` (per pixel: the same
    ``H, W``), scored by :func:`miou`. Returns its dict (and the predicted
    labels ``(M, H, W)`` with ``return_pred``)."""
    if per_pixel and train_labels.shape[-2:] != val_labels.shape[-2:]:
        raise BadInputError(
            f'a per-pixel prior needs training and validation labels of one '
            f'size, got {tuple(train_labels.shape[-2:])} and '
            f'{tuple(val_labels.shape[-2:])}')
    prior = class_prior(class_counts(train_labels, len(classes),
                                     ignore_index), per_pixel)
    pred = prior_prediction(prior, val_labels.shape)
    metrics = miou(pred, val_labels, classes, ignore_index)
    return (metrics, pred) if return_pred else metrics


def crop_box(rng: np.random.Generator, height: int, width: int,
             scale: Sequence[float], ratio: Sequence[float]):
    """``(top, left, h, w)`` of a random resized crop, torchvision's
    ``RandomResizedCrop.get_params`` rule: up to 10 draws of an area
    (``scale`` x the image's, uniform) and a log-uniform aspect ratio in
    ``ratio``, the first that fits placed uniformly; else the whole image
    (its aspect clamped into ``ratio``), centred."""
    area = height * width
    log_ratio = np.log(ratio)
    for _ in range(10):
        target = area * rng.uniform(*scale)
        aspect = np.exp(rng.uniform(*log_ratio))
        w = int(round(np.sqrt(target * aspect)))
        h = int(round(np.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return (int(rng.integers(0, height - h + 1)),
                    int(rng.integers(0, width - w + 1)), h, w)
    aspect = width / height
    if aspect < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif aspect > max(ratio):
        h, w = height, int(round(height * max(ratio)))
    else:
        h, w = height, width
    return (height - h) // 2, (width - w) // 2, h, w


def augment_view(rng: np.random.Generator, img: np.ndarray, labels: Tensor,
                 size, augment: dict = HBIRD_AUGMENT):
    """One augmented memory view (:data:`HBIRD_AUGMENT`, in Open
    Hummingbird's order): colour jitter of the uint8 image ``(H, W, 3)``
    (torchvision's ``adjust_brightness``, ``adjust_contrast``,
    ``adjust_saturation``, ``adjust_hue``), then the same
    :func:`crop_box` of image and labels ``(H, W)`` resized to ``size``
    (bilinear with antialiasing, nearest); ``size`` may be a function of
    the crop's ``(h, w)`` (NaFlex: its size within a token budget).

    Returns:
        ``(uint8 image (h, w, 3), labels (h, w) long)``.
    """
    import torchvision.transforms.functional as TF
    from PIL import Image

    from .dense import image_size
    pil = Image.fromarray(np.ascontiguousarray(img[..., :3]))
    for name, adjust in (('brightness', TF.adjust_brightness),
                         ('contrast', TF.adjust_contrast),
                         ('saturation', TF.adjust_saturation),
                         ('hue', TF.adjust_hue)):
        if rng.random() < augment['jitter_prob']:
            r = augment[name]
            pil = adjust(pil, rng.uniform(-r, r) if name == 'hue' else
                         rng.uniform(1 - r, 1 + r))
    if tuple(labels.shape) != (pil.height, pil.width):
        raise BadInputError(f'labels {tuple(labels.shape)} for an image of '
                            f'{pil.height}x{pil.width}')
    top, left, h, w = crop_box(rng, pil.height, pil.width, augment['scale'],
                               augment['ratio'])
    h_out, w_out = size((h, w)) if callable(size) else image_size(size)
    view = pil.resize((w_out, h_out), Image.BILINEAR,
                      box=(left, top, left + w, top + h))
    crop = labels[top:top + h, left:left + w].float()[None, None]
    crop = F.interpolate(crop, size=(h_out, w_out), mode='nearest')[0, 0]
    return np.asarray(view), crop.long()


def augmented_memory(backbone, infos: Sequence[dict], size, mean, std,
                     num_classes: int, ignore_index: int = 255,
                     augment_epochs: int = 2,
                     memory_size: Optional[int] = None, seed: int = 0,
                     batch_size: int = 32, device='cpu',
                     max_tokens: Optional[int] = None):
    """The memory bank of the last output of ``backbone`` over the training
    images and labels of mmseg data ``infos`` (read one batch at a time; a
    progress bar over the batches of all passes where there are many,
    :func:`~mmpos.evaluation.frozen.with_progress`).

    Args:
        augment_epochs: passes over the images, each view augmented by
            :func:`augment_view` (image ``i`` of epoch ``e`` drawn from
            ``numpy.random.default_rng([seed, e, i])``); ``0``: one pass of
            the images resized to ``size`` (the online probe's memory).
        memory_size: patches kept at most, ``memory_size // (images *
            passes)`` per view (:func:`sample_memory_patches`); ``None``:
            every labelled patch.
        max_tokens: NaFlex views instead of squares of ``size`` (module
            docstring; ``backbone`` a RoPE ViT with ``out_type='raw'``):
            each crop, or image with ``augment_epochs=0``, resized at its
            aspect ratio within that many patches, its labels with it;
            the views of a batch run as one padded NaFlex batch, each
            image's patches and draws as alone.

    Returns:
        ``(features (P, C) normalised, label distributions (P, K))``.
    """
    from mmpos.apis.features import preprocess, read_images
    from mmpos.datasets.transforms import naflex_size

    from .dense import dense_features, image_size, read_label_maps, \
        resize_maps
    from .frozen import with_progress
    from .naflex import (check_naflex_backbone, naflex_inputs, naflex_maps,
                         naflex_patch)
    if augment_epochs < 0:
        raise BadInputError(f'augment_epochs must be >= 0, got '
                            f'{augment_epochs}')
    passes = max(augment_epochs, 1)
    per_view = None
    if memory_size is not None:
        if memory_size < 1:
            raise BadInputError(f'memory_size must be >= 1, got '
                                f'{memory_size}')
        per_view = max(1, memory_size // (len(infos) * passes))
    view_size = size
    if max_tokens is not None:
        check_naflex_backbone(backbone)
        view_size = functools.partial(naflex_size,
                                      patch_size=naflex_patch(backbone),
                                      max_tokens=max_tokens)
    feats: List[Tensor] = []
    labels: List[Tensor] = []
    for epoch, start in with_progress([
            (epoch, start) for epoch in range(passes)
            for start in range(0, len(infos), batch_size)]):
        batch = infos[start:start + batch_size]
        images = read_images([info['img_path'] for info in batch])
        maps = read_label_maps(batch)
        rngs = [np.random.default_rng([seed, epoch, start + i])
                for i in range(len(batch))]
        if augment_epochs:
            views = [augment_view(rng, img, torch.from_numpy(
                np.asarray(lab, np.int64)), view_size)
                     for rng, img, lab in zip(rngs, images, maps)]
            images = [v[0] for v in views]
            targets = torch.stack([v[1] for v in views]) if (
                max_tokens is None) else [v[1][None] for v in views]
        elif max_tokens is None:
            targets = resize_maps(maps, image_size(size), torch.long)
        else:  # NaFlexResize's images: the labels to the same size
            targets = [resize_maps([lab], view_size(img.shape[:2]),
                                   torch.long)
                       for img, lab in zip(images, maps)]
        if max_tokens is None:  # one grid: the batch at once
            groups = [(dense_features(backbone, preprocess(
                images, size, mean, std), batch_size, device)['patch'][-1],
                       targets, rngs)]
        else:  # each view at its own grid (augmented: already at it)
            inputs = naflex_inputs(images, naflex_patch(backbone)[0],
                                   None if augment_epochs else max_tokens,
                                   mean, std)
            with torch.no_grad():
                view_maps = naflex_maps(backbone, {
                    k: v.to(device) for k, v in inputs.items()})[0][-1]
            groups = [(m[None].float().cpu(), t, [rng])
                      for m, t, rng in zip(view_maps, targets, rngs)]
        for patch, target, group_rngs in groups:
            dist, valid = patch_label_distribution(
                target, patch.shape[-2:], num_classes, ignore_index)
            if per_view is not None:
                valid = sample_memory_patches(dist, valid, per_view,
                                              group_rngs)
            part = memory_bank(patch, dist, valid)
            feats.append(part[0])
            labels.append(part[1])
    return torch.cat(feats), torch.cat(labels)


# ``retrieval_probe`` of a probe config (see the module docstring).
RETRIEVAL_PROBE = dict(size=512, k=30, temperature=0.02, augment_epochs=2,
                       memory_size=None)


def seg_infos(dataset_cfg: dict) -> Tuple[List[dict], tuple, int]:
    """``(data infos, classes, ignore_index)`` of an mmseg segmentation
    dataset config."""
    from .dense import dataset_files
    infos, meta = dataset_files(dataset_cfg, 'seg_map_path')
    return infos, tuple(meta['classes']), infos[0].get('ignore_index', 255)


def seg_data(dataset_cfg: dict, size,
             naflex: Optional[Tuple[Tuple[int, int], int]] = None):
    """``(image paths, labels (N, h, w) long, classes, ignore_index)`` of an
    mmseg segmentation dataset config, labels read by mmseg's
    ``LoadAnnotations`` (the dataset's ``reduce_zero_label``) and resized
    (nearest) to ``size``; ``naflex = (patch size, max_tokens)``: each
    resized instead to its image's NaFlex size
    (:func:`~mmpos.evaluation.naflex.naflex_label_maps`), a list of
    ``(H_i, W_i)``."""
    from .dense import image_size, read_label_maps, resize_maps
    infos, classes, ignore = seg_infos(dataset_cfg)
    if naflex is None:
        labels = resize_maps(read_label_maps(infos), image_size(size),
                             torch.long)
    else:
        from .naflex import naflex_label_maps
        labels = naflex_label_maps(infos, *naflex)
    return [i['img_path'] for i in infos], labels, classes, ignore


def seg_split(cfg, split: str, size, data_root: Optional[str] = None,
              naflex: Optional[Tuple[Tuple[int, int], int]] = None):
    """:func:`seg_data` of a probe config's ``train`` / ``val`` split."""
    from .dense import probe_dataset
    return seg_data(probe_dataset(cfg, split, data_root), size, naflex)


def retrieval_val(cfg, backbone, size, mean, std,
                  data_root: Optional[str] = None, batch_size: int = 32,
                  device='cpu', max_tokens: Optional[int] = None):
    """The ``val`` split of a retrieval probe config with the last output's
    patch features of ``backbone``: ``(image paths, labels, features)``,
    the images resized to ``size`` (labels ``(M, h, w)`` resized to it,
    features ``(M, C, h', w')``), or with ``max_tokens`` each at its
    NaFlex size (:mod:`.naflex`: lists of labels ``(H_i, W_i)`` resized to
    it and maps ``(C, h_i, w_i)``)."""
    from .dense import split_features
    if max_tokens is None:
        paths, labels, _, _ = seg_split(cfg, 'val', size, data_root)
        return paths, labels, split_features(backbone, paths, size, mean,
                                             std, batch_size,
                                             device)['patch'][-1]
    from .naflex import naflex_features, naflex_patch
    ph, pw = naflex_patch(backbone)
    paths, labels, _, _ = seg_split(cfg, 'val', size, data_root,
                                    ((ph, pw), max_tokens))
    feats = naflex_features(backbone, paths, max_tokens, mean, std,
                            batch_size, device)['patch'][-1]
    for path, feat, label in zip(paths, feats, labels):
        if tuple(label.shape) != (feat.shape[1] * ph, feat.shape[2] * pw):
            raise BadInputError(f'{path}: its label map and image differ in '
                                'size')
    return paths, labels, feats


def class_prior_run(cfg, size, data_root: Optional[str] = None,
                    per_pixel: bool = True, batch_size: int = 256):
    """The image-free baseline (:func:`class_prior_miou`) on the ``train``
    and ``val`` splits of an mmseg config ``cfg`` (a retrieval probe config
    or a segmentation probe's), labels resized to ``size``; the training
    labels are counted ``batch_size`` maps at a time. Returns ``(metrics,
    details)`` as the retrieval probe
    (``mmpos.evaluation.dense_suite.retrieval_run``): mmseg's
    ``IoUMetric`` keys, and the settings, validation paths, true and
    predicted labels, classes, ignore index."""
    from .dense import (image_size, probe_dataset, read_label_maps,
                        resize_maps)
    infos, classes, ignore = seg_infos(probe_dataset(cfg, 'train',
                                                     data_root))
    counts = sum(class_counts(resize_maps(
        read_label_maps(infos[start:start + batch_size]), image_size(size),
        torch.long), len(classes), ignore)
                 for start in range(0, len(infos), batch_size))
    val_paths, val_labels, _, _ = seg_split(cfg, 'val', size, data_root)
    pred = prior_prediction(class_prior(counts, per_pixel), val_labels.shape)
    metrics = miou(pred, val_labels, classes, ignore)
    settings = dict(size=size, per_pixel=per_pixel, train_images=len(infos),
                    val_images=len(val_paths), classes=len(classes))
    return metrics, dict(settings=settings, paths=dict(
        train=[i['img_path'] for i in infos], val=val_paths), gt=val_labels,
                         pred=pred, classes=classes, ignore_index=ignore)
