"""Mini datasets: determinism, format validity, loading by the real
mmdet / mmseg / mmpretrain datasets and metrics, and the CLI's errors."""
import json
import os
import os.path as osp
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image

from mmpos_harness import mini_data
from mmpos_harness.mini_data import (MINI_ADE_CLASSES, MINI_COCO_CLASSES,
                                     coco, make_mini_ade, make_mini_coco,
                                     make_unlabeled_images, shapes, textures)

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CLI = osp.join(REPO, 'tools', 'misc', 'make_mini_data.py')
sys.path.insert(0, osp.dirname(CLI))
import make_mini_data  # noqa: E402

COCO_ARGS = dict(num_train=8, num_val=6, img_size=96)
ADE_ARGS = dict(num_train=3, num_val=4, img_size=64)
UNLABELED_ARGS = dict(num_images=16, img_size=64)


@pytest.fixture(scope='module')
def data_root(tmp_path_factory):
    root = tmp_path_factory.mktemp('mini')
    make_mini_coco(root / 'coco', **COCO_ARGS)
    make_mini_ade(root / 'ade', **ADE_ARGS)
    make_unlabeled_images(root / 'unlabeled', **UNLABELED_ARGS)
    return root


def read_tree(root):
    """{relative path: bytes} of every file under ``root``."""
    tree = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = osp.join(dirpath, name)
            with open(path, 'rb') as f:
                tree[osp.relpath(path, root)] = f.read()
    return tree


# ------------------------------------------------------------ determinism
@pytest.mark.parametrize('maker,kwargs', [
    (make_mini_coco, COCO_ARGS),
    (make_mini_ade, ADE_ARGS),
    (make_unlabeled_images, UNLABELED_ARGS),
])
def test_same_seed_same_bytes(tmp_path, data_root, maker, kwargs):
    name = {make_mini_coco: 'coco', make_mini_ade: 'ade'}.get(
        maker, 'unlabeled')
    maker(tmp_path / 'again', **kwargs)
    maker(tmp_path / 'other', seed=1, **kwargs)
    first = read_tree(data_root / name)
    assert read_tree(tmp_path / 'again') == first
    other = read_tree(tmp_path / 'other')
    differing = [k for k in first if k.endswith('.jpg') and
                 first[k] != other.get(k)]
    assert len(differing) > len(first) // 3


def test_image_independent_of_split_size(tmp_path, data_root):
    make_mini_coco(tmp_path / 'small', num_train=2, num_val=1, img_size=96)
    small = read_tree(tmp_path / 'small' / 'train2017')
    full = read_tree(data_root / 'coco' / 'train2017')
    assert all(full[name] == data for name, data in small.items())


# ------------------------------------------------------------ mini-COCO
def test_coco_annotations_valid(data_root):
    from pycocotools import mask as mask_utils
    from pycocotools.coco import COCO

    coco = COCO(str(data_root / 'coco/annotations/instances_train2017.json'))
    assert [c['name'] for c in coco.loadCats(coco.getCatIds())] == list(
        MINI_COCO_CLASSES)
    assert coco.getCatIds() == [1, 2, 3]
    assert len(coco.getImgIds()) == COCO_ARGS['num_train']
    size = COCO_ARGS['img_size']
    areas = []
    for img_id in coco.getImgIds():
        img = coco.loadImgs(img_id)[0]
        assert (img['width'], img['height']) == (size, size)
        assert Image.open(data_root / 'coco/train2017' /
                          img['file_name']).size == (size, size)
        anns = coco.loadAnns(coco.getAnnIds(imgIds=img_id))
        assert len(anns) >= 2
        for ann in anns:
            assert ann['iscrowd'] == 0 and ann['area'] > 0
            for poly in ann['segmentation']:
                xy = np.reshape(poly, (-1, 2))
                assert len(xy) >= 3
                assert (xy >= 0).all() and (xy <= size).all()
            mask = coco.annToMask(ann)
            assert mask.sum() == ann['area']
            rle = mask_utils.encode(np.asfortranarray(mask))
            np.testing.assert_allclose(
                mask_utils.toBbox(rle), ann['bbox'], atol=1e-6)
            areas.append(ann['area'])
    anns = coco.loadAnns(coco.getAnnIds())
    assert {a['category_id'] for a in anns} == {1, 2, 3}
    assert min(areas) < 0.02 * size**2 and max(areas) > 0.15 * size**2
    assert any(len(a['segmentation']) > 1 for a in anns)  # split by occluder


def test_coco_instances_do_not_overlap(data_root):
    """Occlusion: visible masks of one image are disjoint."""
    from pycocotools.coco import COCO

    coco = COCO(str(data_root / 'coco/annotations/instances_val2017.json'))
    for img_id in coco.getImgIds():
        masks = [coco.annToMask(a) for a in
                 coco.loadAnns(coco.getAnnIds(imgIds=img_id))]
        assert np.sum(masks, axis=0).max() == 1


def test_hidden_instances_dropped_and_holes_rejected():
    xs, ys = textures._grid(64)
    big = shapes._shape_mask(xs, ys, 0, 32, 32, 20, 0)
    small = shapes._shape_mask(xs, ys, 4, 32, 32, 8, 0)
    shifted = shapes._shape_mask(xs, ys, 0, 34, 32, 20, 0)
    keep, visible = shapes._visible_layout([small, shifted])
    assert keep == [1] and (visible[0] == shifted).all()
    assert shapes._visible_layout([big, small]) is None  # hole in big


def test_coco_loads_in_mmdet_and_gt_scores_ap_1(data_root):
    from mmcv.transforms import LoadImageFromFile
    from mmdet.datasets import CocoDataset
    from mmdet.datasets.transforms import LoadAnnotations
    from mmdet.evaluation import CocoMetric

    ann_file = str(data_root / 'coco/annotations/instances_val2017.json')
    dataset = CocoDataset(
        data_root=str(data_root / 'coco'),
        ann_file='annotations/instances_val2017.json',
        data_prefix=dict(img='val2017/'),
        metainfo=dict(classes=MINI_COCO_CLASSES),
        pipeline=[
            LoadImageFromFile(),
            LoadAnnotations(with_bbox=True, with_mask=True)
        ],
        test_mode=True)
    assert len(dataset) == COCO_ARGS['num_val']
    metric = CocoMetric(ann_file=ann_file, metric=['bbox', 'segm'])
    metric.dataset_meta = dataset.metainfo
    for results in dataset:
        assert results['img'].shape == (96, 96, 3)
        num = len(results['gt_bboxes'])
        pred = dict(
            bboxes=results['gt_bboxes'].tensor,
            scores=torch.ones(num),
            labels=torch.from_numpy(results['gt_bboxes_labels']),
            masks=torch.from_numpy(results['gt_masks'].to_ndarray()).bool())
        metric.process({}, [
            dict(img_id=results['img_id'], ori_shape=results['ori_shape'],
                 pred_instances=pred)
        ])
    scores = metric.evaluate(len(dataset))
    assert scores['coco/bbox_mAP'] == pytest.approx(1.0)
    assert scores['coco/segm_mAP'] == pytest.approx(1.0)


def test_demo_config_uses_the_coco_classes():
    from mmengine.config import Config

    cfg = Config.fromfile(
        osp.join(REPO, 'configs/_base_/datasets/mini_coco_instance.py'))
    assert tuple(cfg.metainfo['classes']) == MINI_COCO_CLASSES


# ------------------------------------------------------------ mini-ADE
def ade_dataset(root, split):
    from mmcv.transforms import LoadImageFromFile
    from mmseg.datasets import ADE20KDataset
    from mmseg.datasets.transforms import LoadAnnotations

    return ADE20KDataset(
        data_root=str(root / 'ade'),
        data_prefix=dict(
            img_path=f'images/{split}', seg_map_path=f'annotations/{split}'),
        reduce_zero_label=True,
        pipeline=[LoadImageFromFile(), LoadAnnotations()])


def test_ade_files(data_root):
    for split, num in (('training', 3), ('validation', 4)):
        images = sorted(os.listdir(data_root / 'ade/images' / split))
        labels = sorted(os.listdir(data_root / 'ade/annotations' / split))
        assert len(images) == num
        assert [osp.splitext(n)[0] for n in images] == [
            osp.splitext(n)[0] for n in labels]
    label = Image.open(data_root / 'ade/annotations/validation' / labels[0])
    assert label.mode == 'L'
    values = np.unique(np.asarray(label))
    assert set(values) <= {0, *MINI_ADE_CLASSES}


def test_ade_loads_in_mmseg_and_gt_scores_miou_100(data_root):
    from mmseg.evaluation import IoUMetric

    dataset = ade_dataset(data_root, 'validation')
    assert len(dataset) == ADE_ARGS['num_val']
    metric = IoUMetric()
    metric.dataset_meta = dataset.metainfo
    seen = set()
    for results in dataset:
        gt = results['gt_seg_map']
        assert gt.shape == (64, 64)
        seen |= set(np.unique(gt).tolist())
        data = dict(data=torch.from_numpy(gt.astype(np.int64))[None])
        metric.process({}, [dict(pred_sem_seg=data, gt_sem_seg=data)])
    assert seen <= {*range(len(MINI_ADE_CLASSES)), 255}
    assert 255 in seen and len(seen) >= 4
    assert metric.evaluate(len(dataset))['mIoU'] == pytest.approx(100.0)


# ------------------------------------------------------------ unlabeled
def test_unlabeled_loads_in_mmpretrain(data_root):
    from mmpretrain.datasets import CustomDataset

    dataset = CustomDataset(
        data_root=str(data_root / 'unlabeled'), with_label=False,
        pipeline=[])
    assert len(dataset) == UNLABELED_ARGS['num_images']
    names = [osp.basename(dataset[i]['img_path']) for i in range(len(dataset))]
    sources = {osp.splitext(n)[0].split('_', 1)[1] for n in names}
    photos = set(mini_data.available_skimage_photos())
    assert 'synthetic' in sources and sources & photos
    img = Image.open(dataset[0]['img_path'])
    assert img.size == (64, 64) and img.mode == 'RGB'


# ------------------------------------------------------------ safety
def test_interrupted_run_leaves_nothing(tmp_path, monkeypatch):
    calls = []

    def failing_save(img, path):
        calls.append(path)
        if len(calls) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(coco, '_save_jpeg', failing_save)
    with pytest.raises(KeyboardInterrupt):
        make_mini_coco(tmp_path / 'coco', **COCO_ARGS)
    assert os.listdir(tmp_path) == []


def test_force_replaces_only_mini_data_dirs(tmp_path):
    target = tmp_path / 'ade'
    make_mini_ade(target, num_train=1, num_val=1, img_size=32)
    (target / 'extra.txt').write_text('old')
    with pytest.raises(FileExistsError, match='not empty'):
        make_mini_ade(target, num_train=1, num_val=1, img_size=32)
    assert (target / 'extra.txt').exists()
    make_mini_ade(target, num_train=2, num_val=1, img_size=32, force=True)
    assert not (target / 'extra.txt').exists()
    assert len(os.listdir(target / 'images/training')) == 2
    assert sorted(os.listdir(tmp_path)) == ['ade']

    user_dir = tmp_path / 'mine'
    user_dir.mkdir()
    (user_dir / 'keep.txt').write_text('mine')
    with pytest.raises(FileExistsError, match='not written by'):
        make_mini_ade(user_dir, num_train=1, num_val=1, img_size=32,
                      force=True)
    assert (user_dir / 'keep.txt').read_text() == 'mine'


def test_bad_arguments():
    with pytest.raises(ValueError, match='img_size'):
        make_mini_coco('unused', img_size=16)
    with pytest.raises(ValueError, match='num_val'):
        make_mini_ade('unused', num_val=0)


# ------------------------------------------------------------ CLI
def run_cli(*args):
    return subprocess.run([sys.executable, CLI, *map(str, args)],
                          capture_output=True, text=True, cwd=REPO)


def test_cli_writes_missing_datasets_next_to_existing(tmp_path, capsys):
    make_mini_data.main([str(tmp_path), '--which', 'coco', '--num-train',
                         '2', '--num-val', '1', '--img-size', '64'])
    make_mini_data.main([str(tmp_path), '--which', 'ade', '--num-train',
                         '2', '--num-val', '1', '--img-size', '64'])
    assert sorted(os.listdir(tmp_path)) == ['ade', 'coco']
    assert 'done' in capsys.readouterr().out


def test_cli_rerun_is_a_no_op_and_force_never_shrinks(tmp_path, capsys):
    """The same arguments again keep the data untouched; other arguments
    are refused without --force; --force grows or changes a set but never
    lowers an image count (a guide or study may read those images)."""
    def cli(*args):
        make_mini_data.main([str(tmp_path), '--which', 'cls', 'unlabeled',
                             '--img-size', '32', *map(str, args)])

    cli('--num-train', 3, '--num-val', 6, '--num-unlabeled', 4)
    first = {p: p.stat().st_mtime_ns for p in tmp_path.rglob('*')}
    capsys.readouterr()
    cli('--num-train', 3, '--num-val', 6, '--num-unlabeled', 4)
    assert capsys.readouterr().out.count('same arguments, kept') == 2
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob('*')} == first

    with pytest.raises(SystemExit):
        cli('--num-train', 3, '--num-val', 9, '--num-unlabeled', 4)
    err = capsys.readouterr().err
    assert 'num_val 6 -> 9' in err and '--force' in err
    cli('--num-train', 3, '--num-val', 9, '--num-unlabeled', 4, '--force')
    assert len(list((tmp_path / 'cls' / 'val').rglob('*.jpg'))) == 9
    with pytest.raises(SystemExit):
        cli('--num-train', 3, '--num-val', 4, '--num-unlabeled', 4,
            '--force')
    assert 'would shrink' in capsys.readouterr().err
    assert len(list((tmp_path / 'cls' / 'val').rglob('*.jpg'))) == 9


def test_cli_refuses_non_empty_target(tmp_path):
    (tmp_path / 'coco').mkdir()
    (tmp_path / 'coco' / 'precious.txt').write_text('keep me')
    proc = run_cli(tmp_path, '--which', 'coco', '--num-train', '1',
                   '--num-val', '1', '--img-size', '32')
    assert proc.returncode != 0
    assert 'not empty' in proc.stderr and 'Traceback' not in proc.stderr
    assert os.listdir(tmp_path / 'coco') == ['precious.txt']
    assert (tmp_path / 'coco' / 'precious.txt').read_text() == 'keep me'


def test_cli_unwritable_parent(tmp_path):
    blocker = tmp_path / 'file.txt'
    blocker.write_text('not a directory')
    proc = run_cli(blocker / 'sub', '--which', 'ade')
    assert proc.returncode != 0
    assert 'Traceback' not in proc.stderr
    assert f'{blocker} is not a directory' in proc.stderr
    assert blocker.read_text() == 'not a directory'


def test_cli_argument_errors(capsys):
    with pytest.raises(SystemExit) as exc:
        make_mini_data.main(['out', '--which', 'voc'])
    assert exc.value.code != 0
    with pytest.raises(SystemExit) as exc:
        make_mini_data.main(['out', '--img-size', '8'])
    assert exc.value.code != 0
    assert 'img_size must be' in capsys.readouterr().err
