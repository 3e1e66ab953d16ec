"""mini-scenes (the retrieval probe's data) and the evaluation sets' sizes:
deterministic bytes, Pascal VOC's layout read by the probe config, labels
with void on object outlines only, and >= 200 queries by default for the
kNN and retrieval sets."""
import hashlib
import inspect
import os

import numpy as np
import pytest
from mmengine.config import Config
from PIL import Image

from conftest import REPO
from mmpos_harness.mini_data import (EVAL_NUM_VAL, MINI_SCENES_CLASSES,
                                     NUM_VAL, make_all, make_mini_cls,
                                     make_mini_scenes)


def digest(root):
    out = hashlib.sha256()
    for dirpath, _, files in sorted(os.walk(root)):
        for name in sorted(files):
            out.update(name.encode())
            with open(os.path.join(dirpath, name), 'rb') as f:
                out.update(f.read())
    return out.hexdigest()


@pytest.fixture(scope='module')
def scenes(tmp_path_factory):
    root = tmp_path_factory.mktemp('mini_retrieval') / 'scenes'
    make_mini_scenes(str(root), num_train=4, num_val=6, img_size=32)
    return root


def test_scenes_deterministic_and_per_image(scenes, tmp_path):
    make_mini_scenes(str(tmp_path / 'again'), num_train=4, num_val=6,
                     img_size=32)
    assert digest(scenes) == digest(tmp_path / 'again')
    make_mini_scenes(str(tmp_path / 'fewer'), num_train=2, num_val=3,
                     img_size=32)
    for name in ('JPEGImages/val_00002.jpg', 'SegmentationClass/'
                 'train_00001.png'):
        assert (scenes / name).read_bytes() == (tmp_path / 'fewer' /
                                                name).read_bytes()
    make_mini_scenes(str(tmp_path / 'seed'), num_train=4, num_val=6,
                     img_size=32, seed=1)
    assert digest(scenes) != digest(tmp_path / 'seed')
    with pytest.raises(ValueError, match='max_instances'):
        make_mini_scenes(str(tmp_path / 'bad'), max_instances=1)


def test_scenes_labels(scenes):
    """0 background, 1..8 materials, 255 (void) a small share; every image
    has background and an object."""
    for split, num in (('train', 4), ('val', 6)):
        ids = (scenes / f'ImageSets/Segmentation/{split}.txt').read_text(
        ).split()
        assert ids == [f'{split}_{i:05d}' for i in range(num)]
        for stem in ids:
            labels = np.array(Image.open(scenes / 'SegmentationClass' /
                                         f'{stem}.png'))
            image = Image.open(scenes / 'JPEGImages' / f'{stem}.jpg')
            assert labels.shape == (32, 32) and image.size == (32, 32)
            values = set(np.unique(labels).tolist())
            assert values <= set(range(len(MINI_SCENES_CLASSES))) | {255}
            assert 0 in values and values - {0, 255}
            assert (labels == 255).mean() < 0.2


def test_void_is_the_objects_inner_outline():
    """Two overlapping squares (materials 1 and 4 -> labels 2 and 5): void
    on the object pixels with a 4-neighbour of another label, background
    and object interiors kept."""
    from mmpos_harness.mini_data.scenes import _scene_label_map
    back, front = np.zeros((10, 10), bool), np.zeros((10, 10), bool)
    back[1:6, 1:6] = True
    front[3:9, 3:9] = True
    back &= ~front  # visible parts
    labels = _scene_label_map([back, front], [1, 4], 10)
    expected = np.zeros((10, 10), np.uint8)
    expected[1:6, 1:6] = 2
    expected[3:9, 3:9] = 5
    void = np.zeros((10, 10), bool)
    for y in range(10):
        for x in range(10):
            near = [expected[v, u] for v, u in ((y - 1, x), (y + 1, x),
                                                (y, x - 1), (y, x + 1))
                    if 0 <= v < 10 and 0 <= u < 10]
            void[y, x] = expected[y, x] > 0 and any(
                n != expected[y, x] for n in near)
    expected[void] = 255
    assert np.array_equal(labels, expected)
    assert (labels == 2).any() and (labels == 5).sum() == 16


def test_probe_config_reads_scenes(scenes):
    """The retrieval config's dataset (mmseg's BaseSegDataset) lists the
    split's images with their label maps and the generator's classes."""
    from mmpos.evaluation.dense import probe_dataset
    from mmpos.evaluation.dense_retrieval import seg_split
    cfg = Config.fromfile(REPO / 'configs/dense_probes/'
                          'retrieval_mini-scenes.py')
    assert tuple(cfg.scenes_dataset.metainfo.classes) == MINI_SCENES_CLASSES
    paths, labels, classes, ignore = seg_split(cfg, 'val', 32, str(scenes))
    assert classes == MINI_SCENES_CLASSES and ignore == 255
    assert [os.path.basename(p) for p in paths] == [
        f'val_{i:05d}.jpg' for i in range(6)]
    assert np.array_equal(labels[2].numpy(), np.array(Image.open(
        scenes / 'SegmentationClass/val_00002.png')))
    assert probe_dataset(cfg, 'train', str(scenes))['ann_file'].endswith(
        'train.txt')


def test_evaluation_sets_have_200_queries(tmp_path):
    """Defaults: 240 kNN queries in cls (one moves the accuracy by 0.42
    point), 256 retrieval images in scenes, 16 elsewhere; an explicit
    num_val wins."""
    assert inspect.signature(make_mini_cls).parameters[
        'num_val'].default == EVAL_NUM_VAL['cls'] == 240
    assert inspect.signature(make_mini_scenes).parameters[
        'num_val'].default == EVAL_NUM_VAL['scenes'] == 256
    assert NUM_VAL == 16
    make_all(str(tmp_path / 'default'), which=['cls', 'ade'], num_train=3,
             img_size=32)
    for name, count in (('cls', 240), ('ade', 16)):
        marker = (tmp_path / 'default' / name / '.mini_data.json')
        assert f'"num_val": {count}' in marker.read_text()
    assert sum(len(files) for _, _, files in os.walk(
        tmp_path / 'default' / 'cls' / 'val')) == 240
    make_all(str(tmp_path / 'given'), which=['cls'], num_train=3, num_val=5,
             img_size=32)
    assert sum(len(files) for _, _, files in os.walk(
        tmp_path / 'given' / 'cls' / 'val')) == 5


def test_cli_writes_scenes(tmp_path, capsys):
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        'make_mini_data_tool', REPO / 'tools/misc/make_mini_data.py')
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    tool.main([str(tmp_path), '--which', 'scenes', '--num-train', '2',
               '--num-val', '3', '--img-size', '32'])
    assert 'scenes:' in capsys.readouterr().out
    assert (tmp_path / 'scenes/ImageSets/Segmentation/val.txt').read_text(
    ).split() == ['val_00000', 'val_00001', 'val_00002']
