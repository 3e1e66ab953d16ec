"""Frozen-feature evaluation and the feature extraction API (issue 16):
DINO's weighted kNN, ``knn_eval.py`` on a CustomDataset folder with results
read by the table regenerator, ``init_backbone`` / ``extract_features``
against the backbones' own output types, and the ``.npy`` CLI."""

import numpy as np
import pytest
import torch
from mmengine.config import Config

from conftest import REPO
from mmpos.apis import extract_features, init_backbone
from mmpos_harness.results import read_run
from mmpos.evaluation.dense import dense_features
from mmpos.evaluation.frozen import PROGRESS_MIN_STEPS, batch_features
from mmpos.evaluation.knn import knn_accuracy, knn_scores

DEMO_ROPE = 'configs/demo/droppos_vit-tiny-rope-mixed_mini.py'
MINI_CLS = 'configs/rope_vit/vit-mini_rope-mixed_mini-cls.py'


def tool(name):
    """``tools/analysis_tools/<name>.py`` as a module (``main`` in-process)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        name, REPO / 'tools' / 'analysis_tools' / f'{name}.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def clustered(centres, per_class, noise=0.5, seed=0):
    """``per_class`` noisy samples around each class centre."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(len(centres)).repeat_interleave(per_class)
    return centres[labels] + noise * torch.randn(
        len(labels), centres.shape[1], generator=g), labels


def test_knn_class_features_near_perfect_shuffled_at_chance():
    centres = torch.randn(10, 32, generator=torch.Generator().manual_seed(0))
    train, train_y = clustered(centres, 200, seed=1)
    test, test_y = clustered(centres, 100, seed=2)
    acc = knn_accuracy(train, train_y, test, test_y, 10)
    assert acc['top1'] > 99 and acc['top5'] == 100
    shuffled = train_y[torch.randperm(
        len(train_y), generator=torch.Generator().manual_seed(3))]
    chance = knn_accuracy(train, shuffled, test, test_y, 10)
    assert 6 < chance['top1'] < 14  # chance: 10% (1000 queries)


def test_knn_weights_follow_dino():
    """Scores are sums of exp(cos / T) over the k nearest neighbours."""
    train = torch.tensor([[1., 0.], [0.8, 0.6], [0., 1.], [-1., 0.]])
    labels = torch.tensor([0, 1, 1, 2])
    query = torch.tensor([[2., 0.]])
    scores = knn_scores(train, labels, query, 3, k=2, temperature=0.5)
    expected = torch.tensor([[np.exp(1 / 0.5), np.exp(0.8 / 0.5), 0.]])
    torch.testing.assert_close(scores, expected.float())
    # k = 3 adds the orthogonal neighbour (cos 0) to class 1
    scores = knn_scores(train, labels, query, 3, k=3, temperature=0.5)
    assert scores[0, 1].item() == pytest.approx(np.exp(1.6) + 1.)
    with pytest.raises(ValueError, match='k must be'):
        knn_scores(train, labels, query, 3, k=0)


def test_knn_eval_cli_writes_results_for_tables(tmp_path, mini_data):
    backbone = init_backbone(DEMO_ROPE)
    torch.save({'state_dict': {'backbone.' + k: v for k, v in
                               backbone.state_dict().items()}},
               tmp_path / 'ckpt.pth')
    work_dir = tmp_path / 'knn'
    knn_eval = tool('knn_eval')
    knn_eval.main(list(map(str, [
        DEMO_ROPE, tmp_path / 'ckpt.pth', '--data', MINI_CLS, '--data-root',
        mini_data / 'cls', '--size', 32, '--work-dir', work_dir])))
    run = read_run(str(work_dir))
    assert run.status == 'done'
    assert set(run.metrics) == {'knn/cls_top1', 'knn/avg_top1',
                                'knn/class_prior_top1'}
    assert all(0 <= v <= 100 for v in run.metrics.values())
    assert '| knn/cls_top1 |' in (work_dir / 'result.md').read_text()
    # never over a finished result, refused before anything is computed
    with pytest.raises(SystemExit, match='knn_eval.py: error: .*metrics.json '
                       'exists'):
        knn_eval.main(list(map(str, [
            DEMO_ROPE, tmp_path / 'ckpt.pth', '--data', MINI_CLS,
            '--data-root', tmp_path / 'missing', '--work-dir', work_dir])))


def test_knn_eval_raw_pixels_and_the_class_prior(tmp_path, mini_data):
    """``pixels`` probes the patches' pixels (PixelPatches, the config's
    patch size); the image-free class prior beside it is the share of the
    queries in the memory bank's majority class (ties: the first class),
    counted here from the ImageNet-layout folders."""
    work_dir = tmp_path / 'knn'
    tool('knn_eval').main(list(map(str, [
        DEMO_ROPE, 'pixels', '--data', MINI_CLS, '--data-root',
        mini_data / 'cls', '--size', 32, '--work-dir', work_dir])))
    metrics = read_run(str(work_dir)).metrics
    assert 0 <= metrics['knn/avg_top1'] <= 100
    counts = {split: {c.name: len(list(c.iterdir())) for c in sorted(
        (mini_data / 'cls' / split).iterdir())} for split in ('train', 'val')}
    majority = max(counts['train'], key=counts['train'].get)
    assert metrics['knn/class_prior_top1'] == pytest.approx(
        100 * counts['val'][majority] / sum(counts['val'].values()))
    assert 'pixels' in (work_dir / 'result.md').read_text()


def test_knn_eval_shows_progress_over_many_batches(tmp_path, mini_data,
                                                   capsys):
    """#58: feature extraction over many batches shows mmengine's progress
    bar (with_progress): the training split's 48 images at 4 a batch are
    12 batches, the 16 query images 4 batches, under the threshold: no
    bar."""
    tool('knn_eval').main(list(map(str, [
        DEMO_ROPE, 'pixels', '--data', MINI_CLS, '--data-root',
        mini_data / 'cls', '--size', 32, '--batch-size', 4, '--work-dir',
        tmp_path / 'knn'])))
    out = capsys.readouterr().out
    assert out.count('] 12/12, ') == 1 and '] 4/4, ' not in out, out


@pytest.mark.parametrize('num,progress,bar', [
    (PROGRESS_MIN_STEPS, None, True), (PROGRESS_MIN_STEPS - 1, None, False),
    (PROGRESS_MIN_STEPS, False, False), (2, True, True)])
def test_feature_extraction_progress(capsys, num, progress, bar):
    """``batch_features`` and ``dense_features`` show a bar over their
    batches from PROGRESS_MIN_STEPS on (or when told), and extract the same
    features either way."""
    backbone = init_backbone(Config(dict(model=dict(backbone=dict(
        type='RoPEVisionTransformer', arch=dict(
            embed_dims=16, num_layers=1, num_heads=2,
            feedforward_channels=32), img_size=32, patch_size=16))))).eval()
    images = torch.randn(num, 3, 32, 32)
    feats = batch_features(backbone, images, 1, progress=progress)
    assert (f'] {num}/{num}, ' in capsys.readouterr().out) == bar
    dense = dense_features(backbone, images, 1, progress=progress)
    assert (f'] {num}/{num}, ' in capsys.readouterr().out) == bar
    torch.testing.assert_close(feats, batch_features(backbone, images, num))
    torch.testing.assert_close(dense['patch'], dense_features(
        backbone, images, num)['patch'])
    assert capsys.readouterr().out == ''


def mini_vit_config(**backbone):
    return Config(dict(model=dict(backbone=dict(
        type='RoPEVisionTransformer', arch=dict(
            embed_dims=64, num_layers=3, num_heads=2,
            feedforward_channels=128), img_size=224, patch_size=16,
        **backbone))))


@pytest.mark.parametrize('pos', [
    dict(rope=dict(type='mixed')),
    dict(rope=dict(type='axial')),
    dict(rope=None, use_ape=True),
    dict(rope=dict(type='axial', layout='half', axes='yx',
                   periods=dict(base=100.), coords=dict(frame='separate')),
         num_register_tokens=4)])
@pytest.mark.parametrize('hw', [(224, 224), (160, 224)])
def test_extract_features_shapes_and_peer_outputs(pos, hw):
    """Class token and patch map equal the backbone's own ``cls_token`` /
    ``featmap`` outputs on the same weights, at 224 and non-square."""
    cfg = mini_vit_config(**pos)
    torch.manual_seed(0)
    backbone = init_backbone(cfg, out_indices=(0, 2))
    images = torch.randn(2, 3, *hw)
    feats = extract_features(backbone, images)
    h, w = hw[0] // 16, hw[1] // 16
    assert feats['cls_token'].shape == (2, 64)
    assert feats['patch_tokens'].shape == (2, 64, h, w)
    assert [f['index'] for f in feats['layers']] == [0, 2]
    state = backbone.state_dict()
    for out_type, key in (('cls_token', 'cls_token'),
                          ('featmap', 'patch_tokens')):
        peer = init_backbone(
            mini_vit_config(**pos, out_type=out_type), raw_tokens=False,
            out_indices=(0, 2))
        peer.load_state_dict(state)
        with torch.no_grad():
            outs = peer(images)
        for out, layer in zip(outs, feats['layers']):
            torch.testing.assert_close(layer[key], out)


@pytest.mark.parametrize('hw', [(224, 224), (160, 224)])
def test_extract_features_of_a_windowed_backbone(hw):
    """ViTDet window attention (no class token): the patch map equals the
    backbone's own ``featmap``; 160 px is not a multiple of the window."""
    pos = dict(rope=dict(type='mixed'), with_cls_token=False, window_size=4,
               global_attn_indexes=(1, ))
    torch.manual_seed(0)
    backbone = init_backbone(mini_vit_config(**pos), out_indices=(0, 2))
    images = torch.randn(2, 3, *hw)
    feats = extract_features(backbone, images)
    assert feats['cls_token'] is None
    assert feats['patch_tokens'].shape == (2, 64, hw[0] // 16, hw[1] // 16)
    peer = init_backbone(mini_vit_config(**pos, out_type='featmap'),
                         raw_tokens=False, out_indices=(0, 2))
    peer.load_state_dict(backbone.state_dict())
    with torch.no_grad():
        for out, layer in zip(peer(images), feats['layers']):
            torch.testing.assert_close(layer['patch_tokens'], out)


def test_init_backbone_reads_training_checkpoints(tmp_path):
    cfg = mini_vit_config()
    torch.manual_seed(0)
    source = init_backbone(cfg)
    state = source.state_dict()
    images = torch.randn(1, 3, 64, 48)
    expected = extract_features(source, images)['patch_tokens']
    ckpts = {
        'train.pth': {'state_dict': {'backbone.' + k: v
                                     for k, v in state.items()},
                      'meta': {}},
        'bare.pth': state,
        'teacher.pth': {'state_dict': {'teacher.module.backbone.' + k: v
                                       for k, v in state.items()}},
    }
    for name, ckpt in ckpts.items():
        torch.save(ckpt, tmp_path / name)
        prefix = 'teacher.module.backbone.' if name == 'teacher.pth' else \
            'backbone.'
        torch.manual_seed(1)  # another random init under the checkpoint
        loaded = init_backbone(cfg, str(tmp_path / name), prefix=prefix)
        torch.testing.assert_close(
            extract_features(loaded, images)['patch_tokens'], expected)
    with pytest.raises(FileNotFoundError):
        init_backbone(cfg, str(tmp_path / 'missing.pth'))


def test_extract_features_cli(tmp_path):
    from skimage import data
    from PIL import Image
    Image.fromarray(data.chelsea()).save(tmp_path / 'chelsea.png')
    backbone = init_backbone(DEMO_ROPE)
    torch.save(backbone.state_dict(), tmp_path / 'backbone.pth')
    out = tmp_path / 'feats'
    tool('extract_features').main(list(map(str, [
        DEMO_ROPE, tmp_path / 'backbone.pth', tmp_path / 'chelsea.png',
        '--out-dir', out, '--size', 32, 48, '--layers', 1, 3])))
    names = sorted(p.name for p in out.iterdir())
    assert names == [f'chelsea.layer{i}.{k}.npy' for i in (1, 3)
                     for k in ('cls_token', 'patch_tokens')]
    assert np.load(out / 'chelsea.layer3.patch_tokens.npy').shape == (96, 4,
                                                                       6)
    assert np.load(out / 'chelsea.layer1.cls_token.npy').shape == (96, )
