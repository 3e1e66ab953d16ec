"""mmpos.guardrails.data_check: annotation problems named by file, entry
and value; label maps sampled at launch, all of them when asked."""
import json

import numpy as np
import pytest
from PIL import Image

from mmpos.guardrails.data_check import coco_problems, seg_label_problems


def coco_json(**changes):
    data = dict(
        images=[dict(id=1, file_name='a.jpg', width=32, height=32)],
        annotations=[dict(id=7, image_id=1, category_id=3, bbox=[1, 2, 5, 6],
                          area=30, iscrowd=0,
                          segmentation=[[1, 2, 6, 2, 6, 8]])],
        categories=[dict(id=3, name='circle')])
    for key, value in changes.items():
        if key in data:
            data[key] = value
        else:
            data['annotations'][0][key] = value
    return data


@pytest.mark.parametrize('changes, expected', [
    (dict(), None),
    (dict(images=None), "missing key(s) ['images']"),
    (dict(bbox=[1, 2, 5]), 'annotations[0] (id 7): bbox [1, 2, 5] is not 4'),
    (dict(bbox=[1, 2, -5, 6]), 'bbox [1, 2, -5, 6] has a negative width'),
    (dict(category_id=9), 'category_id 9 is not in categories [3]'),
    (dict(image_id=2), 'image_id 2 is not an image id'),
    (dict(segmentation=[[1, 2, 3]]), 'odd number (3) of coordinates'),
])
def test_coco_problems_name_file_entry_and_value(tmp_path, changes,
                                                 expected):
    data = coco_json(**changes)
    data = {k: v for k, v in data.items() if v is not None}
    path = tmp_path / 'ann.json'
    path.write_text(json.dumps(data))
    problems = list(coco_problems(str(path), classes=('circle', )))
    if expected is None:
        assert problems == []
    else:
        assert len(problems) == 1
        assert problems[0].startswith(f'{path}: ')
        assert expected in problems[0]


def test_coco_syntax_and_classes(tmp_path):
    path = tmp_path / 'ann.json'
    path.write_text('{"images": [}')
    assert 'not valid JSON: Expecting value: line 1 column 13' in next(
        coco_problems(str(path)))
    path.write_text(json.dumps(coco_json()))
    assert list(coco_problems(str(path), classes=('circle', 'cube'))) == [
        f"{path}: metainfo class 'cube' is not among the category names "
        "['circle']"
    ]


def test_seg_label_values_out_of_range(tmp_path):
    img, label = tmp_path / 'a.jpg', tmp_path / 'a.png'
    Image.new('RGB', (8, 4)).save(img)
    values = np.zeros((4, 8), np.uint8)
    values[0, :3] = [150, 255, 151]
    Image.fromarray(values).save(label)
    pairs = [(str(img), str(label))]
    # ADE20K: raw 0..150 (0 = other) and 255 are fine, 151 is not.
    assert list(seg_label_problems(pairs, 150, True)) == [
        f'{label}: label values [151] out of range (allowed 0..150 or 255: '
        'num_classes=150, reduce_zero_label=True)'
    ]
    assert 'label values [150, 151]' in next(
        seg_label_problems(pairs, 150, False))
    Image.new('RGB', (4, 4)).save(img)
    assert list(seg_label_problems(pairs, 152, True)) == [
        f'{label}: label map is 4x8 but its image {img} is 4x4'
    ]


def seg_folder(root, n):
    """``n`` 8x8 images with label maps of classes 0..1 under ``root``."""
    for sub in ('img', 'ann'):
        (root / sub).mkdir(parents=True)
    for i in range(n):
        Image.new('RGB', (8, 8)).save(root / 'img' / f'{i}.jpg')
        Image.fromarray(np.zeros((8, 8), np.uint8)).save(
            root / 'ann' / f'{i}.png')
    return dict(type='BaseSegDataset', data_root=str(root),
                data_prefix=dict(img_path='img', seg_map_path='ann'),
                img_suffix='.jpg', seg_map_suffix='.png',
                metainfo=dict(classes=('a', 'b')))


def test_launch_checks_a_fixed_sample_of_label_maps(tmp_path):
    """At launch the label maps of a fixed-seed sample per dataset are
    read (the message says so); validate_dataset's full check reads all."""
    from mmengine.config import Config

    from mmpos.errors import DatasetFormatError
    from mmpos.guardrails.data_check import (check_config_datasets,
                                             config_problems, sample_indices)
    assert sample_indices(40, 32) == sample_indices(40, 32)  # fixed seed
    assert len(set(sample_indices(40, 32))) == 32
    assert sample_indices(5, 32) == sample_indices(5, None) == list(range(5))
    sampled = sample_indices(6, 2)
    outside = next(i for i in range(6) if i not in sampled)
    cfg = Config(dict(default_scope='mmseg', train_dataloader=dict(
        dataset=seg_folder(tmp_path, 6))))
    bad = tmp_path / 'ann' / f'{outside}.png'
    Image.fromarray(np.full((8, 8), 7, np.uint8)).save(bad)
    assert list(config_problems(cfg, ['train'], sample=2)) == []
    assert list(config_problems(cfg, ['train'])) == [
        f'{bad}: label values [7] out of range (allowed 0..1 or 255: '
        'num_classes=2, reduce_zero_label=False)']
    check_config_datasets(cfg, ['train'], sample=2)
    inside = tmp_path / 'ann' / f'{sampled[1]}.png'
    Image.fromarray(np.full((8, 8), 9, np.uint8)).save(inside)
    with pytest.raises(DatasetFormatError) as info:
        check_config_datasets(cfg, ['train'], sample=2)
    assert str(info.value) == (
        f'{inside}: label values [9] out of range (allowed 0..1 or 255: '
        'num_classes=2, reduce_zero_label=False) (label maps checked: a fixed '
        'sample of 2 per dataset; all problems: python tools/misc/'
        'validate_dataset.py CONFIG)')


def test_wrapped_datasets_and_num_classes_are_found():
    from mmpos.guardrails.data_check import (_leaf_dataset_cfgs,
                                             num_classes_problems)
    a, b, c = (dict(type='X', ann_file=n) for n in 'abc')
    wrapped = dict(type='ConcatDataset', datasets=[
        a, dict(type='RepeatDataset', times=2, dataset=b),
        dict(type='ClassBalancedDataset', dataset=dict(
            type='ConcatDataset', datasets=[c]))])
    assert list(_leaf_dataset_cfgs(wrapped)) == [a, b, c]
    assert list(_leaf_dataset_cfgs(a)) == [a]
    model = dict(rpn_head=dict(num_classes=1), roi_head=dict(bbox_head=[
        dict(num_classes=2), dict(num_classes=5)]))
    assert list(num_classes_problems(model, ['p', 'q', 'r'], 'ds')) == [
        'model.roi_head.bbox_head.0.num_classes=2 is below the 3 classes of '
        'ds (p, q, r)']
