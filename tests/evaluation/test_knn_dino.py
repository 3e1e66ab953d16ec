"""kNN classification against DINO's ``knn_classifier`` (``eval_knn.py``),
re-implemented here from its formula, on identical inputs (ties included),
and the majority-class baseline by hand."""
import pytest
import torch
import torch.nn.functional as F

from mmpos.evaluation.knn import (class_prior_accuracy, knn_accuracy,
                                  knn_scores)
from mmpos.errors import BadInputError


def dino_knn(train, train_labels, test, test_labels, k, T, num_classes):
    """DINO's weighted kNN as its ``knn_classifier`` computes it (features
    L2-normalised by its extraction): per query the top-``k`` dot products
    (``topk(sorted=True)``), one-hot neighbour labels weighted by
    ``exp(s / T)`` and summed, classes ranked by ``sort(1, True)``; top-5
    counts the first ``min(5, k)`` ranks. One chunk (DINO's 1/100 of the
    test set per chunk is 0 images below 100 queries). Returns the
    per-query hits ``(M, min(5, k))``."""
    train = F.normalize(train, dim=1, p=2)
    test = F.normalize(test, dim=1, p=2)
    distances, indices = torch.mm(test, train.t()).topk(k, largest=True,
                                                         sorted=True)
    neighbours = torch.gather(train_labels.view(1, -1).expand(
        test.shape[0], -1), 1, indices)
    one_hot = torch.zeros(test.shape[0] * k, num_classes).scatter_(
        1, neighbours.reshape(-1, 1), 1)
    probs = (one_hot.view(test.shape[0], -1, num_classes) *
             distances.clone().div_(T).exp_().view(test.shape[0], -1,
                                                    1)).sum(1)
    _, predictions = probs.sort(1, True)
    return predictions.eq(test_labels.view(-1, 1))[:, :min(5, k)]


def per_query_top1(train, train_labels, test, test_labels, k, T, classes):
    return torch.tensor([knn_accuracy(train, train_labels, test[i:i + 1],
                                      test_labels[i:i + 1], classes, k,
                                      T)['top1'] == 100.
                         for i in range(test.shape[0])])


def test_random_features_match_dino():
    g = torch.Generator().manual_seed(0)
    centres = torch.randn(10, 16, generator=g)
    train_labels = torch.randint(0, 10, (300, ), generator=g)
    test_labels = torch.randint(0, 10, (200, ), generator=g)
    train = centres[train_labels] + 1.5 * torch.randn(300, 16, generator=g)
    test = centres[test_labels] + 1.5 * torch.randn(200, 16, generator=g)
    hits = dino_knn(train, train_labels, test, test_labels, 20, 0.07, 10)
    ours = knn_accuracy(train, train_labels, test, test_labels, 10)
    assert ours['top1'] == pytest.approx(100. * hits[:, 0].float().mean())
    assert ours['top5'] == pytest.approx(100. * hits.any(1).float().mean())
    assert 20 < ours['top1'] < 100  # neither chance nor trivial
    assert torch.equal(per_query_top1(train, train_labels, test, test_labels,
                                      20, 0.07, 10), hits[:, 0])


def test_ties_match_dino():
    """Exact ties (axis-aligned unit features): a class-score tie goes to
    the lower class index whatever the memory order; equal similarities
    inside the top k add up; a tie at the k-th neighbour between neighbours
    of one label cannot change the prediction."""
    e = torch.eye(4)
    train = torch.stack([e[0], e[0], e[1], e[1], e[2], e[2], e[2]])
    cases = [
        # query e0: neighbours 0, 1 (labels 2, 0; equal weight) -> class 0
        (torch.tensor([2, 0, 1, 1, 1, 1, 1]), e[0], 2, 0),
        (torch.tensor([0, 2, 1, 1, 1, 1, 1]), e[0], 2, 0),
        # query e0 + e1: four equal neighbours, labels 2, 2, 1, 1 -> 1
        (torch.tensor([2, 2, 1, 1, 0, 0, 0]), e[0] + e[1], 4, 1),
        # query e2: three tied neighbours, k = 2 picks two, all label 0
        (torch.tensor([1, 1, 2, 2, 0, 0, 0]), e[2], 2, 0),
        # query e0 + 0.5 e2: two of similarity 0.89 (label 1) beat three
        # of 0.45 (label 2)
        (torch.tensor([1, 1, 0, 0, 2, 2, 2]), e[0] + .5 * e[2], 5, 1),
    ]
    for train_labels, query, k, expected in cases:
        test_labels = torch.tensor([expected])
        hits = dino_knn(train, train_labels, query[None], test_labels, k,
                        0.07, 3)
        assert bool(hits[0, 0])  # DINO predicts the expected class
        assert knn_accuracy(train, train_labels, query[None], test_labels,
                            3, k)['top1'] == 100.
        # and no other class
        for wrong in set(range(3)) - {expected}:
            assert knn_accuracy(train, train_labels, query[None],
                                torch.tensor([wrong]), 3, k)['top1'] == 0.


def test_scores_are_the_weighted_votes():
    e = torch.eye(3)
    train = torch.stack([e[0], e[0] + e[1], e[2]])
    scores = knn_scores(train, torch.tensor([0, 1, 1]), e[0][None], 2, k=2,
                        temperature=0.5)
    # neighbours: e0 (s = 1, label 0) and e0 + e1 (s = 1 / sqrt 2, label 1)
    assert torch.allclose(scores, torch.tensor(
        [[torch.e**2, torch.exp(torch.tensor(2**.5)).item()]]))


def test_class_prior_is_the_majority_class():
    # counts 3, 5, 5, 1, 0, 0: ranking 1, 2, 0, 3, 4 (ties: lower index)
    train_labels = torch.tensor([0] * 3 + [1] * 5 + [2] * 5 + [3])
    test_labels = torch.tensor([1, 1, 2, 0, 5, 4, 3, 1])
    acc = class_prior_accuracy(train_labels, test_labels, 6)
    assert acc == dict(top1=pytest.approx(100 * 3 / 8),
                       top5=pytest.approx(100 * 7 / 8))
    assert set(acc) == set(knn_accuracy(
        torch.randn(14, 4), train_labels, torch.randn(8, 4), test_labels,
        6))  # the probe's keys
    assert class_prior_accuracy(train_labels, test_labels, 3 + 1)[
        'top1'] == pytest.approx(100 * 3 / 8)  # no top5 below 5 classes
    with pytest.raises(BadInputError, match='outside'):
        class_prior_accuracy(train_labels, test_labels, 3)
    with pytest.raises(BadInputError, match='no training label'):
        class_prior_accuracy(torch.tensor([], dtype=torch.long),
                             test_labels, 6)
