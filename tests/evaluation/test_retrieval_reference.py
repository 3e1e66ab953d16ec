"""In-context retrieval and its mIoU against Open Hummingbird
(``vpariza/open-hummingbird-eval``: ``HbirdEvaluation`` memory, search,
``_cross_attention``, ``_get_patch_scores_and_mask``; ``PredsmIoU``;
torchvision's ``RandomResizedCrop`` rule it augments with), each
re-implemented here from its formula and run on the same fixtures,
including the edge cases: ignored pixels, classes absent from both
prediction and truth, a class only in the truth or only predicted, and the
documented differences (absent classes, Hungarian matching)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment
from torchvision.transforms import RandomResizedCrop

from mmpos.evaluation.dense_retrieval import (crop_box, hummingbird_miou,
                                              memory_patch_scores, miou,
                                              patch_label_distribution)


def hbird_predictions(train_feats, train_labels, val_feats, val_size,
                      num_classes, k=30, beta=0.02):
    """Open Hummingbird's retrieval: memory of L2-normalised patch features
    with the class frequencies of the patch's pixels (255 -> class 0),
    the ``k`` largest inner products of the (unnormalised) query with the
    memory, softmax(cos / beta) over them weighting the neighbours' labels
    (``_cross_attention``), bilinear upsampling, argmax."""
    n, c, h, w = train_feats.shape
    labels = train_labels.clone()
    labels[labels == 255] = 0
    ps = labels.shape[-1] // w
    patches = labels.reshape(n, 1, h, ps, w, ps).permute(0, 2, 4, 1, 3, 5)
    soft = F.one_hot(patches.reshape(n, h, w, ps * ps),
                     num_classes).float().mean(dim=3)
    feats = train_feats.permute(0, 2, 3, 1).reshape(n, h * w, c)
    memory = (feats / torch.norm(feats, dim=2, keepdim=True)).flatten(0, 1)
    memory_labels = soft.flatten(0, 2)
    m = val_feats.shape[0]
    q = val_feats.permute(0, 2, 3, 1).reshape(m, h * w, c)
    idx = (q.reshape(-1, c) @ memory.T).topk(k, dim=1).indices
    keys = memory[idx].view(m * h * w, k, c)
    values = memory_labels[idx].view(m * h * w, k, -1)
    qn = F.normalize(q, dim=-1).reshape(m * h * w, 1, c)
    attn = torch.bmm(qn, F.normalize(keys, dim=-1).transpose(1, 2)).squeeze(
        1) / beta
    label_hat = torch.bmm(attn.softmax(-1).unsqueeze(1), values).squeeze(1)
    label_hat = label_hat.view(m, h, w, -1).permute(0, 3, 1, 2)
    return F.interpolate(label_hat, size=val_size,
                         mode='bilinear').argmax(dim=1)


def hbird_miou(pred, gt, num_classes, ignore_index=255, hungarian=True):
    """Open Hummingbird's ``PredsmIoU.compute`` in percent: confusion of the
    non-ignored pixels, predicted classes matched to true ones by the
    Hungarian algorithm on the IoU matrix (``hungarian=False``: its
    ``linear_probe`` identity), IoU = TP / max(TP + FP + FN, 1e-8) averaged
    over all classes."""
    gt, pred = gt.reshape(-1).long(), pred.reshape(-1).long()
    keep = gt != ignore_index
    gt, pred = gt[keep], pred[keep]
    conf = torch.bincount(gt * num_classes + pred,
                          minlength=num_classes**2).view(
                              num_classes, num_classes).double()
    rows, cols = conf.sum(1, keepdim=True), conf.sum(0, keepdim=True)
    iou = conf / (rows + cols - conf).clamp(min=1e-8)
    mapping = torch.arange(num_classes)
    if hungarian:
        r, c = linear_sum_assignment(1.0 - iou.numpy())
        mapping = torch.zeros(num_classes, dtype=torch.long)
        mapping[torch.as_tensor(c)] = torch.as_tensor(r)
    mapped = torch.zeros_like(conf).index_add_(1, mapping, conf)
    tp = mapped.diag()
    fp, fn = mapped.sum(0) - tp, mapped.sum(1) - tp
    return 100 * float((tp / (tp + fp + fn).clamp(min=1e-8)).mean())


def fixture(seed=0, n=6, m=3, k_classes=4, grid=4, patch=4):
    """Features that carry each patch's class fractions plus noise, label
    maps constant on 2 x 2 blocks of pixels inside 4 x 4-pixel patches."""
    g = torch.Generator().manual_seed(seed)
    size = grid * patch
    blocks = torch.randint(0, k_classes, (n + m, size // 2, size // 2),
                           generator=g)
    blocks[0, :2, :2] = torch.arange(4).view(2, 2)  # every class in memory
    labels = blocks.repeat_interleave(2, 1).repeat_interleave(2, 2)
    fractions = F.one_hot(labels, k_classes).float().reshape(
        n + m, grid, patch, grid, patch, k_classes).mean((2, 4))
    feats = 4 * fractions.permute(0, 3, 1, 2) + torch.randn(
        n + m, k_classes, grid, grid, generator=g)
    feats = torch.cat([feats, torch.randn(n + m, 4, grid, grid,
                                          generator=g)], 1)
    return feats[:n], labels[:n], feats[n:], labels[n:]


def test_retrieval_predictions_equal_open_hummingbird():
    classes = ('a', 'b', 'c', 'd')
    for seed in range(3):
        train_feats, train_labels, val_feats, val_labels = fixture(seed)
        val_labels[:, :2] = 255  # ignored when scoring, not in the memory
        for k in (30, 5):
            _, ours = hummingbird_miou(train_feats, train_labels, val_feats,
                                       val_labels, classes, k=k,
                                       return_pred=True)
            ref = hbird_predictions(train_feats, train_labels, val_feats,
                                    val_labels.shape[-2:], 4, k=k)
            assert torch.equal(ours, ref)
            agree = (ours == val_labels)[val_labels != 255].float().mean()
            # informative, not trivial: above chance, every class predicted
            assert 0.33 < agree < 1 and len(ours.unique()) == 4


def test_retrieval_uses_temperature_and_k():
    """One memory patch per class; the query at cosine 0.6 of class 0 and
    0.5 of class 1: softmax(cos / 0.02) gives class 0 weight
    1 / (1 + e^-5); k = 1 keeps class 0 only; a large temperature evens
    out the two."""
    from mmpos.evaluation.dense_retrieval import retrieve_labels
    memory = torch.eye(2)
    query = torch.tensor([0.6, 0.5]).view(1, 2, 1, 1)
    out = retrieve_labels(query, memory, torch.eye(2), k=2)
    w0 = 1 / (1 + np.exp(-(0.6 - 0.5) / np.linalg.norm([.6, .5]) / 0.02))
    assert out.flatten().tolist() == pytest.approx([w0, 1 - w0], abs=1e-6)
    assert retrieve_labels(query, memory, torch.eye(2),
                           k=1).flatten().tolist() == [1., 0.]
    assert retrieve_labels(query, memory, torch.eye(2), k=2,
                           temperature=1e4).flatten().tolist() == \
        pytest.approx([.5, .5], abs=1e-4)


CLASSES4 = ('a', 'b', 'c', 'd')


def maps(*rows):
    return torch.tensor([rows])


@pytest.mark.parametrize('case', [
    # every class present, mostly right: one number
    dict(gt=maps([0, 0, 1, 1, 2, 2, 3, 3], [0, 1, 1, 2, 2, 3, 3, 0]),
         pred=maps([0, 0, 1, 2, 2, 2, 3, 0], [0, 1, 1, 2, 3, 3, 3, 0]),
         same=True),
    # ignore 255: those pixels count in neither, whatever is predicted there
    dict(gt=maps([0, 255, 1, 1, 2, 255, 3, 3], [255, 1, 1, 2, 2, 3, 3, 0]),
         pred=maps([0, 3, 1, 1, 2, 0, 3, 0], [2, 1, 1, 2, 2, 3, 3, 0]),
         same=True),
    # class 3 only in the truth (never predicted): IoU 0 in both
    dict(gt=maps([0, 0, 1, 1, 2, 2, 3, 3], [0, 0, 1, 1, 2, 2, 3, 3]),
         pred=maps([0, 0, 1, 1, 2, 2, 2, 0], [0, 0, 1, 1, 2, 2, 1, 1]),
         same=True),
    # class 3 only predicted (absent from the truth): IoU 0 in both
    dict(gt=maps([0, 0, 1, 1, 2, 2, 2, 2], [0, 0, 1, 1, 2, 2, 0, 1]),
         pred=maps([0, 0, 1, 1, 2, 2, 2, 3], [0, 0, 1, 1, 2, 2, 0, 1]),
         same=True),
    # class 3 absent from both: left out here, IoU 0 of 4 there
    dict(gt=maps([0, 0, 1, 1, 2, 2, 0, 1], [0, 0, 1, 1, 2, 2, 2, 2]),
         pred=maps([0, 0, 1, 1, 2, 2, 1, 1], [0, 0, 1, 1, 2, 2, 2, 0]),
         same=False, empty=1),
], ids=['all-present', 'ignore-255', 'only-in-gt', 'only-predicted',
        'absent-from-both'])
def test_miou_against_open_hummingbird(case):
    ours = miou(case['pred'], case['gt'], CLASSES4)['mIoU']
    ref = hbird_miou(case['pred'], case['gt'], 4)
    # the Hungarian matching is the identity on these predictions
    assert ref == pytest.approx(hbird_miou(case['pred'], case['gt'], 4,
                                           hungarian=False))
    if case['same']:
        assert ours == pytest.approx(ref, abs=0.005)  # mmseg rounds to .01
    else:
        assert ours == pytest.approx(ref * 4 / (4 - case['empty']),
                                     abs=0.005)
    assert 0 < ours < 100


def test_miou_scores_labels_as_predicted():
    """Two classes swapped everywhere: Open Hummingbird's Hungarian
    matching undoes the swap (100); mmseg's mIoU, as its ``linear_probe``
    identity, scores the labels as predicted (0 for both)."""
    gt = maps([0, 0, 1, 1, 2, 2, 3, 3])
    pred = maps([1, 1, 0, 0, 2, 2, 3, 3])
    assert hbird_miou(pred, gt, 4) == pytest.approx(100)
    ours = miou(pred, gt, CLASSES4)['mIoU']
    assert ours == pytest.approx(hbird_miou(pred, gt, 4, hungarian=False),
                                 abs=0.005)
    assert ours == pytest.approx(50)


def test_memory_patch_scores_equal_open_hummingbird():
    """``_get_patch_scores_and_mask``: per image the number of patches
    containing each class, summed over the classes of a patch."""
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 5, (3, 8, 8), generator=g)
    labels[1] = 2  # one class everywhere
    dist, valid = patch_label_distribution(labels, (4, 4), 5)
    ours = memory_patch_scores(dist, valid)
    for i, gt in enumerate(labels):
        patches = gt.reshape(4, 2, 4, 2).permute(0, 2, 1, 3).reshape(4, 4,
                                                                    4)
        presence = F.one_hot(patches, 5).any(dim=2)  # (S, S, C)
        frequency = presence.sum(dim=(0, 1)).float()
        ref = presence.float().reshape(-1, 5) @ frequency
        assert torch.equal(ours[i], ref)
    assert (ours[1] == 16).all()


@pytest.mark.parametrize('hw', [(40, 64), (64, 40), (48, 48)])
def test_crop_fallback_equals_torchvision(hw):
    """No draw fits (scale 5-6 of the area): the centred crop of the whole
    image, its aspect clamped into the ratio range, as torchvision."""
    rng = np.random.default_rng(0)
    ours = crop_box(rng, *hw, (5, 6), (3 / 4, 4 / 3))
    ref = RandomResizedCrop.get_params(torch.empty(3, *hw), [5, 6],
                                       [3 / 4, 4 / 3])
    assert ours == tuple(ref)


def test_crop_distribution_matches_torchvision():
    """Open Hummingbird's scale (0.5, 2) and ratio (3/4, 4/3): 2,000 crops
    each of ours and torchvision's agree in how often the fallback is taken
    and in their mean area and aspect; every crop lies inside the image."""
    h, w, scale, ratio = 40, 64, (0.5, 2.0), (3 / 4, 4 / 3)
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    ours = np.array([crop_box(rng, h, w, scale, ratio) for _ in range(2000)])
    ref = np.array([RandomResizedCrop.get_params(
        torch.empty(3, h, w), list(scale), list(ratio)) for _ in range(2000)])
    for boxes in (ours, ref):
        assert (boxes[:, :2] >= 0).all()
        assert (boxes[:, 0] + boxes[:, 2] <= h).all()
        assert (boxes[:, 1] + boxes[:, 3] <= w).all()

    def stats(boxes):
        fallback = ((boxes[:, 2] == 40) & (boxes[:, 3] == 53)).mean()
        return (fallback, (boxes[:, 2] * boxes[:, 3]).mean() / (h * w),
                np.log(boxes[:, 3] / boxes[:, 2]).mean())
    (f1, a1, r1), (f2, a2, r2) = stats(ours), stats(ref)
    assert f1 == pytest.approx(f2, abs=0.02) and f1 > 0.01
    assert a1 == pytest.approx(a2, abs=0.02) and 0.5 < a1 < 1
    assert r1 == pytest.approx(r2, abs=0.02)
