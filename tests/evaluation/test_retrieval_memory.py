"""The retrieval probe's augmented memory bank (views, labels cropped with
their image, determinism, bounded memory), its class-prior baseline by
hand, and the probe and the baseline end to end on mini-scenes."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config

from conftest import REPO
from mmpos.evaluation.dense_retrieval import (augment_view, augmented_memory,
                                              class_counts, class_prior,
                                              class_prior_miou,
                                              class_prior_run,
                                              patch_label_distribution,
                                              sample_memory_patches)
from mmpos.errors import BadInputError

SCENES = REPO / 'configs/dense_probes/retrieval_mini-scenes.py'


class PatchColours(torch.nn.Module):
    """A frozen 'backbone' whose patch feature is the mean colour of each
    8 x 8 patch (a ``(B, 3, h, w)`` map)."""

    def forward(self, x):
        return F.avg_pool2d(x, 8)


@pytest.fixture(scope='module')
def scenes(tmp_path_factory):
    from mmpos_harness.mini_data import make_mini_scenes
    root = tmp_path_factory.mktemp('retrieval') / 'scenes'
    make_mini_scenes(str(root), num_train=5, num_val=4, img_size=32)
    return root


def train_infos(root):
    from mmpos.evaluation.dense import probe_dataset
    from mmpos.evaluation.dense_retrieval import seg_infos
    return seg_infos(probe_dataset(Config.fromfile(SCENES), 'train',
                                   str(root)))


def test_view_crops_labels_with_their_image():
    """Red where the label is 1, blue where it is 0, in every view (the
    hue jitter of at most 0.1 keeps red red and blue blue), away from the
    edge between them."""
    labels = torch.zeros(40, 56, dtype=torch.long)
    labels[:, 30:] = 1
    img = np.zeros((40, 56, 3), np.uint8)
    img[labels.numpy() == 0] = (20, 30, 200)
    img[labels.numpy() == 1] = (200, 30, 20)
    for i in range(20):
        view, lab = augment_view(np.random.default_rng(i), img, labels, 32)
        assert view.shape == (32, 32, 3) and lab.shape == (32, 32)
        interior = F.max_pool2d(lab[None, None].float(), 5, 1, 2)[0, 0] == \
            -F.max_pool2d(-lab[None, None].float(), 5, 1, 2)[0, 0]
        red = view[..., 0].astype(int) > view[..., 2]
        assert (red[interior.numpy()] == (lab[interior] == 1).numpy()).all()
    with pytest.raises(BadInputError, match='labels'):
        augment_view(np.random.default_rng(0), img, labels[:10], 32)


def test_views_are_jittered_and_cropped():
    """A grey image whose labels are the column index: brightness (the one
    jitter that changes grey) changes about half the views (0.5 times the
    0.96 of its factors that move 128 by more than 0.5); every
    crop keeps at least sqrt(0.5 * 3 / 4) of the width (scale >= 0.5,
    aspect >= 3/4) and most views are crops, not the whole image."""
    img = np.full((48, 48, 3), 128, np.uint8)
    labels = torch.arange(48).expand(48, 48)
    changed, widths = [], []
    for i in range(300):
        view, lab = augment_view(np.random.default_rng(i), img, labels, 24)
        changed.append(abs(view.mean() - 128) > 0.5)
        widths.append((lab.max() - lab.min() + 1).item() / 48)
    assert 0.35 < np.mean(changed) < 0.6  # +-4.5 standard deviations
    assert min(widths) >= 0.6
    assert np.mean(np.array(widths) < 1) > 0.5


def test_memory_is_deterministic_and_batch_free(scenes):
    infos, classes, ignore = train_infos(scenes)
    args = (PatchColours(), infos, 32, (0., ) * 3, (1., ) * 3, len(classes),
            ignore)
    first = augmented_memory(*args, augment_epochs=2, batch_size=2)
    again = augmented_memory(*args, augment_epochs=2, batch_size=3)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    other = augmented_memory(*args, augment_epochs=2, seed=1)
    assert not torch.equal(first[0], other[0])
    assert first[0].shape[1] == 3 and first[1].shape[1] == len(classes)
    assert torch.allclose(first[0].norm(dim=1), torch.ones(1))
    assert torch.allclose(first[1].sum(1), torch.ones(1))
    # 2 passes, 16 patches per view, patches without a labelled pixel out
    assert 5 * 16 < first[0].shape[0] <= 2 * 5 * 16


def test_unaugmented_memory_is_the_resized_training_set(scenes):
    """``augment_epochs=0``: the patches of the images and labels resized
    to the input size, as the online probe's memory."""
    from mmpos.apis.features import preprocess, read_images
    from mmpos.evaluation.dense import read_label_maps, resize_maps
    from mmpos.evaluation.dense_retrieval import memory_bank
    infos, classes, ignore = train_infos(scenes)
    memory = augmented_memory(PatchColours(), infos, 32, (0., ) * 3,
                              (1., ) * 3, len(classes), ignore,
                              augment_epochs=0)
    images = preprocess(read_images([i['img_path'] for i in infos]), 32,
                        (0., ) * 3, (1., ) * 3)
    labels = resize_maps(read_label_maps(infos), (32, 32), torch.long)
    dist, valid = patch_label_distribution(labels, (4, 4), len(classes))
    expected = memory_bank(F.avg_pool2d(images, 8), dist, valid)
    assert all(torch.allclose(a, b) for a, b in zip(memory, expected))


def test_bounded_memory(scenes):
    infos, classes, ignore = train_infos(scenes)
    args = (PatchColours(), infos, 32, (0., ) * 3, (1., ) * 3, len(classes),
            ignore)
    # 30 // (5 images * 2 passes) = 3 patches per view
    feats, _ = augmented_memory(*args, augment_epochs=2, memory_size=30)
    assert feats.shape[0] == 30
    feats, _ = augmented_memory(*args, augment_epochs=2, memory_size=1)
    assert feats.shape[0] == 10  # at least one per view
    with pytest.raises(BadInputError, match='memory_size'):
        augmented_memory(*args, memory_size=0)
    with pytest.raises(BadInputError, match='augment_epochs'):
        augmented_memory(*args, augment_epochs=-1)


def test_bounded_memory_keeps_rare_classes_first():
    """Per image 14 patches of class 0 and 2 of class 1 (scores 14 and 2,
    times a uniform draw): keeping 2 patches keeps the class-1 patches
    more than 3 times as often as the 2 / 16 of a uniform choice (about
    half the time: the draw multiplies the score)."""
    labels = torch.zeros(200, 16, 16, dtype=torch.long)
    labels[:, :4, :8] = 1  # 2 of the 16 4x4-pixel patches
    labels[:, 0, 12] = 255  # ignored pixels do not make a class
    dist, valid = patch_label_distribution(labels, (4, 4), 2)
    keep = sample_memory_patches(dist, valid, 2, [
        np.random.default_rng(i) for i in range(200)])
    assert (keep.flatten(1).sum(1) == 2).all()
    rare = keep[:, 0, :2].float().mean()
    assert rare > 3 * 2 / 16
    empty = torch.full((1, 16, 16), 255)
    dist, valid = patch_label_distribution(empty, (4, 4), 2)
    assert not sample_memory_patches(dist, valid, 2, [
        np.random.default_rng(0)]).any()  # no labelled patch, none kept


def test_class_prior_by_hand():
    train = torch.tensor([[[0, 1], [2, 255]], [[0, 1], [1, 255]]])
    val = torch.tensor([[[0, 1], [2, 2]]])
    # per pixel: 0; 1; 2 vs 1 tied -> 1; never labelled -> overall (1)
    counts = class_counts(train, 3)
    assert counts[:, 1, 0].tolist() == [0, 1, 1]
    assert counts.sum().item() == 6  # ignored pixels not counted
    prior = class_prior(counts)
    assert prior.argmax(0).tolist() == [[0, 1], [1, 1]]
    assert prior[:, 1, 1].tolist() == pytest.approx([2 / 6, 3 / 6, 1 / 6])
    metrics, pred = class_prior_miou(train, val, ('a', 'b', 'c'),
                                     return_pred=True)
    assert pred.tolist() == [[[0, 1], [1, 1]]]
    # IoU a 1/1, b 1/3, c 0/2
    assert metrics['mIoU'] == pytest.approx(100 * (1 + 1 / 3) / 3, abs=0.01)
    # overall: class 1 everywhere -> IoU a 0, b 1/4, c 0
    assert class_prior_miou(train, val, ('a', 'b', 'c'), per_pixel=False)[
        'mIoU'] == pytest.approx(100 / 4 / 3, abs=0.01)
    with pytest.raises(BadInputError, match='one size'):
        class_prior_miou(train, torch.zeros(1, 3, 3, dtype=torch.long),
                         ('a', 'b', 'c'))
    with pytest.raises(BadInputError, match='no labelled'):
        class_prior(class_counts(torch.full((1, 2, 2), 255), 3))
    with pytest.raises(BadInputError, match='outside'):
        class_counts(train, 2)


def test_probe_and_baseline_end_to_end(scenes):
    """The probe config on mini-scenes: the retrieval run and the class
    prior give the same metrics and details."""
    from mmpos.evaluation.dense_suite import retrieval_run
    cfg = Config.fromfile(SCENES)
    metrics, details = retrieval_run(cfg, PatchColours(), (0., ) * 3,
                                     (1., ) * 3, data_root=str(scenes),
                                     size=32)
    prior, prior_details = class_prior_run(cfg, 32, str(scenes))
    assert set(metrics) == set(prior) == {'aAcc', 'mIoU', 'mAcc'}
    assert set(details) == set(prior_details)
    assert details['settings']['augment_epochs'] == 2
    assert details['settings']['val_images'] == 4
    assert details['classes'] == prior_details['classes'] == tuple(
        cfg.scenes_dataset.metainfo.classes)
    assert details['gt'].shape == details['pred'].shape == (4, 32, 32)
    # image-free: one prediction for every validation image; counting the
    # training maps in batches changes nothing
    assert (prior_details['pred'] == prior_details['pred'][:1]).all()
    from mmpos.evaluation.dense_retrieval import seg_split
    train = seg_split(cfg, 'train', 32, str(scenes))[1]
    direct, pred = class_prior_miou(train, details['gt'], details['classes'],
                                    return_pred=True)
    batched, again = class_prior_run(cfg, 32, str(scenes), batch_size=2)
    assert direct == prior == batched
    assert torch.equal(pred, prior_details['pred'])
    assert torch.equal(pred, again['pred'])
