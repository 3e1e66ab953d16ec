"""Weighted k-nearest-neighbour classification of frozen features, as in
DINO's kNN evaluation (Caron et al. 2021, §4.1 and their ``eval_knn.py``).

Features are L2-normalised; for a test feature ``x`` the ``k`` training
features with the largest cosine similarity ``s_i`` vote for their labels
with weight ``exp(s_i / T)``; the class with the largest summed weight is
the prediction (defaults ``k = 20``, ``T = 0.07``). Top-1 and top-5 (when
there are at least 5 classes) accuracies are reported in percent.
"""
from typing import Dict

import torch
import torch.nn.functional as F
from torch import Tensor

from mmpos.utils.errors import BadInputError


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


def knn_accuracy(train_feats: Tensor, train_labels: Tensor, test_feats: Tensor,
                 test_labels: Tensor, num_classes: int, k: int = 20,
                 temperature: float = 0.07) -> Dict[str, float]:
    """``top1`` (and ``top5`` with >= 5 classes) accuracy in percent of
    :func:`knn_scores`' predictions."""
    scores = knn_scores(train_feats, train_labels, test_feats, num_classes,
                        k, temperature)
    ranked = scores.argsort(dim=1, descending=True)
    hits = ranked == test_labels.view(-1, 1).long()
    out = dict(top1=100. * hits[:, 0].float().mean().item())
    if num_classes >= 5:
        out['top5'] = 100. * hits[:, :5].any(1).float().mean().item()
    return out
