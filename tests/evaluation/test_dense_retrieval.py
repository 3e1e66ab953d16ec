"""In-context dense retrieval (Hummingbird): patch label distributions by
hand, retrieval equal to a brute-force k-NN, mIoU 100 for features equal to
one-hot labels, mmseg's IoUMetric, and the tool end to end; on NaFlex
features, each image of a mixed-size batch as alone and squares at the
square size as the square probe."""
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


@pytest.mark.parametrize('size', [['--size', '32'],
                                  ['--max-tokens', '12']])  # NaFlex
def test_retrieval_tool_end_to_end(dense_mini, tmp_path, size):
    load_tool('dense_retrieval').main([
        str(REPO / 'configs/demo/droppos_vit-tiny-rope-mixed_mini.py'),
        'none', '--probe',
        str(REPO / 'configs/dense_probes/retrieval_mini-stuff.py'),
        '--data-root', str(dense_mini / 'stuff'), *size,
        '--work-dir', str(tmp_path), '--pictures', '2'])
    metrics = json.load(open(tmp_path / 'metrics.json'))
    assert set(metrics) == {'retrieval/mIoU', 'retrieval/mAcc',
                            'retrieval/aAcc'}
    assert 0 <= metrics['retrieval/mIoU'] <= 100
    assert ('max_tokens' in (tmp_path / 'result.md').read_text()) == (
        size[0] == '--max-tokens')
    assert (tmp_path / 'retrieval_pictures.png').is_file()


# NaFlex: each image at its aspect ratio within a token budget
NAFLEX_SHAPES = [(40, 120), (96, 32), (64, 64), (50, 70)]  # (H, W) pixels
MEAN, STD = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]


def naflex_backbone():
    from mmpos.models.backbones import RoPEVisionTransformer
    torch.manual_seed(0)
    model = RoPEVisionTransformer(
        arch=dict(embed_dims=32, num_layers=2, num_heads=2,
                  feedforward_channels=64), patch_size=8, img_size=32,
        rope=dict(type='mixed'), use_ape=True, num_register_tokens=1,
        out_type='raw')
    model.init_weights()
    return model.eval()


def seg_folder(root, shapes, num_classes=3):
    """An mmseg ``BaseSegDataset`` config of random images and blocky labels
    of the given sizes, the same files in ``train`` and ``val``."""
    import numpy as np
    from mmengine.config import Config
    from PIL import Image
    g = np.random.default_rng(0)
    for folder in ('img', 'ann'):
        (root / folder).mkdir()
    for i, (h, w) in enumerate(shapes):
        Image.fromarray(g.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(
            root / 'img' / f'{i}.png')
        blocks = g.integers(0, num_classes, (h // 8 + 1, w // 8 + 1))
        Image.fromarray(np.kron(blocks, np.ones((8, 8)))[:h, :w].astype(
            np.uint8)).save(root / 'ann' / f'{i}.png')
    dataset = dict(type='BaseSegDataset', data_root=str(root),
                   data_prefix=dict(img_path='img', seg_map_path='ann'),
                   img_suffix='.png', seg_map_suffix='.png',
                   metainfo=dict(classes=CLASSES[:num_classes]))
    return Config(dict(train_dataloader=dict(dataset=dataset),
                       val_dataloader=dict(dataset=dataset),
                       retrieval_probe=dict(size=32, augment_epochs=0)))


@pytest.mark.parametrize('augment_epochs', [0, 2])
def test_naflex_memory_of_a_mixed_batch_is_each_image_alone(
        tmp_path, augment_epochs):
    """Views of their own grids in one padded batch give the memory that
    each gives alone (batch of 1), bounded memory draws included."""
    from mmpos.evaluation.dense_retrieval import augmented_memory, seg_infos
    cfg = seg_folder(tmp_path, NAFLEX_SHAPES)
    infos, classes, ignore = seg_infos(cfg.train_dataloader.dataset)
    model = naflex_backbone()
    memories = [augmented_memory(model, infos, 32, MEAN, STD, len(classes),
                                 ignore, augment_epochs, 40, seed=0,
                                 batch_size=size, max_tokens=24)
                for size in (4, 1)]
    assert memories[0][0].shape[0] == 4 * max(augment_epochs, 1) * (
        40 // (4 * max(augment_epochs, 1)))
    torch.testing.assert_close(*[m[0] for m in memories], rtol=1e-5,
                               atol=1e-5)
    torch.testing.assert_close(*[m[1] for m in memories])


def test_naflex_retrieval_of_a_mixed_batch_is_each_image_alone(tmp_path):
    """Every validation image of a padded batch of four aspect ratios gets
    the map and the retrieved labels it gets alone; labels are at each
    image's NaFlex size (its grid times the patch); hummingbird_miou on the
    lists (the online probe's NaFlex evaluation) is the unaugmented NaFlex
    memory's retrieval."""
    from mmengine.config import Config

    from mmpos.datasets.transforms import naflex_size
    from mmpos.evaluation.dense_retrieval import (augmented_memory,
                                                  retrieval_miou,
                                                  retrieval_val, seg_infos)
    cfg = seg_folder(tmp_path, NAFLEX_SHAPES)
    model = naflex_backbone()
    infos, classes, _ = seg_infos(cfg.train_dataloader.dataset)
    memory = augmented_memory(model, infos, 32, MEAN, STD, len(classes),
                              augment_epochs=0, max_tokens=24)
    paths, labels, feats = retrieval_val(cfg, model, 32, MEAN, STD,
                                         batch_size=4, max_tokens=24)
    sizes = [tuple(label.shape) for label in labels]
    assert sizes == [naflex_size(hw, 8, 24) for hw in NAFLEX_SHAPES]
    assert len(set(sizes)) == 4
    assert [tuple(f.shape[1:]) for f in feats] == [(h // 8, w // 8)
                                                   for h, w in sizes]
    metrics, pred = retrieval_miou(memory, feats, labels, classes,
                                   return_pred=True)
    for i in range(len(paths)):
        one = Config(dict(val_dataloader=dict(dataset=dict(
            cfg.val_dataloader.dataset, indices=[i]))))
        _, label, feat = retrieval_val(one, model, 32, MEAN, STD,
                                       batch_size=1, max_tokens=24)
        torch.testing.assert_close(feats[i], feat[0], rtol=1e-5, atol=1e-5)
        assert torch.equal(labels[i], label[0])
        _, alone = retrieval_miou(memory, feat, label, classes,
                                  return_pred=True)
        assert torch.equal(pred[i], alone[0])
    assert metrics == miou(pred, labels, classes)
    # the online probe's evaluation (an unaugmented memory of the same
    # images, each labelled from its own map) on the same lists
    online, online_pred = hummingbird_miou(feats, labels, feats, labels,
                                           classes, return_pred=True)
    assert online == pytest.approx(metrics)
    assert all(torch.equal(a, b) for a, b in zip(online_pred, pred))


def test_naflex_retrieval_on_squares_at_the_square_size_is_the_square(
        tmp_path):
    """Square images whose NaFlex size is the square size (32 px, 16
    patches of 8): the unaugmented NaFlex run gives the square run's
    memory and scores (the definitions coincide)."""
    from mmpos.evaluation.dense_suite import retrieval_run
    cfg = seg_folder(tmp_path, [(32, 32)] * 3)
    model = naflex_backbone()
    square, sq = retrieval_run(cfg, model, MEAN, STD, seed=0)
    naflex, nf = retrieval_run(cfg, model, MEAN, STD, seed=0, max_tokens=16)
    assert nf['settings']['max_tokens'] == 16
    assert nf['settings']['memory_patches'] == sq['settings'][
        'memory_patches'] == 3 * 16
    assert naflex == square
    assert all(torch.equal(a, b) for a, b in zip(nf['pred'], sq['pred']))
    assert all(torch.equal(a, b) for a, b in zip(nf['gt'], sq['gt']))
