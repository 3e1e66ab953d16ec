"""In-context dense retrieval (Hummingbird): patch label distributions by
hand, retrieval equal to a brute-force k-NN, mIoU 100 for features equal to
one-hot labels, mmseg's IoUMetric, and the tool end to end."""
import json

import pytest
import torch
import torch.nn.functional as F

from conftest import REPO
from mmpos.evaluation.dense_retrieval import (hummingbird_miou, miou,
                                              patch_label_distribution,
                                              retrieve_labels)
from conftest import load_tool

CLASSES = ('a', 'b', 'c', 'd')


def test_patch_label_distribution_by_hand():
    labels = torch.tensor([[[0, 0, 2, 2], [1, 255, 2, 2]]])  # 1 x 2 x 4
    dist, valid = patch_label_distribution(labels, (1, 2), 3)
    assert torch.allclose(dist[0, 0, 0], torch.tensor([2 / 3, 1 / 3, 0.]))
    assert torch.allclose(dist[0, 0, 1], torch.tensor([0., 0., 1.]))
    assert valid.all()
    _, valid = patch_label_distribution(torch.full((1, 2, 2), 255), (1, 1),
                                        3)
    assert not valid.any()  # no labelled pixel: not in the memory


def test_retrieval_equals_brute_force():
    g = torch.Generator().manual_seed(0)
    memory = F.normalize(torch.randn(50, 6, generator=g), dim=1)
    labels = torch.rand(50, 4, generator=g).softmax(1)
    query = torch.randn(2, 6, 3, 2, generator=g)
    out = retrieve_labels(query, memory, labels, k=5, temperature=0.1)
    for b in range(2):
        for i in range(3):
            for j in range(2):
                q = F.normalize(query[b, :, i, j], dim=0)
                sims = [(float(q @ m), n) for n, m in enumerate(memory)]
                top = sorted(sims, reverse=True)[:5]
                weights = torch.tensor([s for s, _ in top]) / 0.1
                weights = weights.softmax(0)
                expected = sum(w * labels[n] for w, (_, n) in zip(
                    weights, top))
                assert torch.allclose(out[b, :, i, j], expected, atol=1e-6)


def test_one_hot_features_give_miou_100():
    g = torch.Generator().manual_seed(0)
    # patch-level labels (features one-hot per patch, labels constant in
    # 8 x 8 blocks: the image halves), and pixel-level ones (a patch per
    # pixel, any labels)
    halves = torch.randint(0, 4, (6, 2), generator=g)
    halves[:2] = torch.tensor([[0, 1], [2, 3]])  # every class in memory
    patch_labels = halves[:, None, :].expand(6, 4, 2).repeat_interleave(
        2, 2)
    cases = [(patch_labels, patch_labels.repeat_interleave(
        8, 1).repeat_interleave(8, 2))]
    pixels = torch.randint(0, 4, (6, 8, 8), generator=g)
    cases.append((pixels, pixels))
    for grid_labels, labels in cases:
        feats = F.one_hot(grid_labels, 4).permute(0, 3, 1, 2).float()
        metrics = hummingbird_miou(feats[:3], labels[:3], feats[3:],
                                   labels[3:], CLASSES)
        assert metrics['mIoU'] == 100.


def test_miou_is_mmsegs_by_hand():
    gt = torch.tensor([[[0, 0, 1, 1, 255]]])
    pred = torch.tensor([[[0, 1, 1, 1, 0]]])
    metrics = miou(pred, gt, ('x', 'y'))
    # IoU x = 1 / 2, y = 2 / 3 (the ignored pixel does not count)
    assert metrics['mIoU'] == pytest.approx(100 * (1 / 2 + 2 / 3) / 2,
                                            abs=0.01)
    assert metrics['aAcc'] == pytest.approx(75.)


def test_reading_data_leaves_the_default_scope(dense_mini):
    """The probes read mmseg datasets; the backbone of the next probe is
    then still built from mmpos' registry."""
    from mmengine.registry import DefaultScope, init_default_scope

    import mmpos_harness.mini_data.datasets  # noqa: F401 (MiniStuffDataset)
    from mmpos.evaluation.dense_retrieval import seg_data
    init_default_scope('mmpretrain')
    seg_data(dict(type='MiniStuffDataset', data_root=str(
        dense_mini / 'stuff'), data_prefix=dict(
            img_path='images/val', seg_map_path='annotations/val')), 32)
    assert DefaultScope.get_current_instance().scope_name == 'mmpretrain'


def test_retrieval_tool_end_to_end(dense_mini, tmp_path):
    load_tool('dense_retrieval').main([
        str(REPO / 'configs/demo/droppos_vit-tiny-rope-mixed_mini.py'),
        'none', '--probe',
        str(REPO / 'configs/dense_probes/retrieval_mini-stuff.py'),
        '--data-root', str(dense_mini / 'stuff'), '--size', '32',
        '--work-dir', str(tmp_path), '--pictures', '2'])
    metrics = json.load(open(tmp_path / 'metrics.json'))
    assert set(metrics) == {'retrieval/mIoU', 'retrieval/mAcc',
                            'retrieval/aAcc'}
    assert 0 <= metrics['retrieval/mIoU'] <= 100
    assert (tmp_path / 'retrieval_pictures.png').is_file()
