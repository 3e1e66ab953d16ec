"""Weighted k-nearest-neighbour classification of frozen features, as in
DINO's kNN evaluation (Caron et al. 2021, §4.1 and ``knn_classifier`` of
their ``eval_knn.py``), and its image-free baseline.

Features are L2-normalised; for a test feature ``x`` the ``k`` training
features with the largest cosine similarity ``s_i`` vote for their labels
with weight ``exp(s_i / T)``; the class with the largest summed weight is
the prediction (defaults ``k = 20``, ``T = 0.07``). Top-1 and top-5 (when
there are at least 5 classes) accuracies are reported in percent.

Ties, as DINO's code resolves them:

* neighbours tied at the ``k``-th similarity: ``torch.topk`` picks (DINO
  calls the same ``topk``);
* classes with equal summed weight: the lower class index ranks first.
  DINO ranks with ``probs.sort(1, True)``, which on the CPU keeps the index
  order for up to 16 classes (every mini set) but leaves it unspecified
  above; here the sort is stable, so the rule holds for any class count.

Differences from DINO's code: top-5 is left out with fewer than 5 classes
(DINO counts the first ``min(5, k)`` ranks, 100% with 3 classes); the test
features are processed in chunks of a fixed size (DINO: 1/100 of the test
set per chunk, which fails below 100 test images); neither changes a
prediction.

:func:`class_prior_accuracy` is the image-free baseline of the probe: every
query is given the memory set's class ranking by frequency (its majority
class first), scored by the same accuracy code.
"""
from typing import Dict

import torch
import torch.nn.functional as F
from torch import Tensor

from mmpos.errors import BadInputError


def knn_scores(train_feats: Tensor, train_labels: Tensor, test_feats: Tensor,
               num_classes: int, k: int = 20, temperature: float = 0.07,
               chunk: int = 1024) -> Tensor:
    """Summed neighbour weights per class, ``(M, num_classes)``.

    Args:
        train_feats: ``(N, C)`` features of the labelled (memory) set.
        train_labels: ``(N,)`` integer labels in ``[0, num_classes)``.
        test_feats: ``(M, C)`` features to classify.
        k: neighbours (capped at ``N``).
        temperature: ``T`` of the ``exp(s / T)`` weights.
        chunk: test features per similarity matrix (memory bound).
    """
    if k < 1 or temperature <= 0:
        raise BadInputError(f'k must be >= 1 and temperature > 0, got '
                            f'k={k}, temperature={temperature}')
    if train_feats.shape[0] != train_labels.shape[0]:
        raise BadInputError(f'{train_feats.shape[0]} training features for '
                            f'{train_labels.shape[0]} labels')
    train = F.normalize(train_feats.float(), dim=1)
    test = F.normalize(test_feats.float(), dim=1)
    k = min(k, train.shape[0])
    scores = []
    for start in range(0, test.shape[0], chunk):
        sims, idx = (test[start:start + chunk] @ train.T).topk(k, dim=1)
        weights = (sims / temperature).exp()
        votes = torch.zeros(idx.shape[0], num_classes, dtype=weights.dtype)
        scores.append(votes.scatter_add_(1, train_labels[idx].long(),
                                         weights))
    return torch.cat(scores)


def scores_accuracy(scores: Tensor, test_labels: Tensor) -> Dict[str, float]:
    """``top1`` (and ``top5`` with >= 5 classes) accuracy in percent of
    class scores ``(M, K)`` against labels ``(M,)``; classes are ranked by
    score, equal scores by the lower class index (a stable sort)."""
    if scores.shape[0] != test_labels.shape[0]:
        raise BadInputError(f'{scores.shape[0]} scored queries for '
                            f'{test_labels.shape[0]} labels')
    ranked = torch.sort(scores, dim=1, descending=True, stable=True)[1]
    hits = ranked == test_labels.view(-1, 1).long()
    out = dict(top1=100. * hits[:, 0].float().mean().item())
    if scores.shape[1] >= 5:
        out['top5'] = 100. * hits[:, :5].any(1).float().mean().item()
    return out


def knn_accuracy(train_feats: Tensor, train_labels: Tensor, test_feats: Tensor,
                 test_labels: Tensor, num_classes: int, k: int = 20,
                 temperature: float = 0.07) -> Dict[str, float]:
    """:func:`scores_accuracy` of :func:`knn_scores`' predictions."""
    return scores_accuracy(
        knn_scores(train_feats, train_labels, test_feats, num_classes, k,
                   temperature), test_labels)


def class_prior_accuracy(train_labels: Tensor, test_labels: Tensor,
                         num_classes: int) -> Dict[str, float]:
    """Image-free baseline of the kNN probe: every query scored with the
    class counts of the memory set's labels ``(N,)``, so the majority class
    is every prediction (ties: the lower class index) and top-5 the five
    most frequent classes. Returns :func:`knn_accuracy`'s dict for labels
    ``(M,)``."""
    train_labels = train_labels.long()
    if not train_labels.numel():
        raise BadInputError('no training label for the class prior')
    if train_labels.min() < 0 or train_labels.max() >= num_classes:
        raise BadInputError(f'training labels outside [0, {num_classes})')
    counts = torch.bincount(train_labels, minlength=num_classes).float()
    return scores_accuracy(counts.expand(test_labels.shape[0], -1),
                           test_labels)
