"""tools/analysis_tools/multires_eval.py: the pipeline rewrite per
resolution, and a run on the mini classification set with a checkpoint of
the (untrained) mini RoPE-ViT classifier."""
import csv
import json
import math
import os.path as osp
import sys

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope
from PIL import Image

import mmpos  # noqa: F401
from mmpos_harness.mini_data import make_mini_cls
from mmpos.registry import MODELS

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
sys.path.insert(0, osp.join(REPO, 'tools', 'analysis_tools'))
import multires_eval  # noqa: E402

MINI_CONFIG = osp.join(REPO, 'configs', 'rope_vit',
                       'vit-mini_rope-mixed_mini-cls.py')
IN1K_CONFIG = osp.join(REPO, 'configs', 'rope_vit',
                       'vit-small-p16_rope-mixed_8xb256-400e_in1k.py')


def test_pipeline_rewrite_sets_resize_and_crop():
    pipeline = Config.fromfile(IN1K_CONFIG).test_dataloader.dataset.pipeline
    assert multires_eval.config_crop_ratio(pipeline) == 1.0
    new = multires_eval.set_test_resolution(pipeline, 384, 0.875)
    assert new[1]['type'] == 'ResizeEdge' and new[1]['scale'] == 439
    assert new[1]['interpolation'] == 'bicubic'
    assert new[2] == dict(type='CenterCrop', crop_size=384)
    assert pipeline[1]['scale'] == 224  # the original is left alone
    with pytest.raises(multires_eval.MultiresError,
                       match="no CenterCrop.*'LoadImageFromFile'"):
        multires_eval.set_test_resolution(
            [dict(type='LoadImageFromFile'),
             dict(type='Resize', scale=224)], 96, 1.)


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory):
    """Untrained mini classifier; RoPE-Mixed + APE so that both the
    rotation and the APE interpolation run at other resolutions."""
    root = tmp_path_factory.mktemp('multires')
    cfg = Config.fromfile(MINI_CONFIG)
    cfg.model.backbone.use_ape = True
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        model = MODELS.build(cfg.model)
    model.init_weights()
    # mmpretrain zero-initialises the head; random logits vary per image
    torch.nn.init.normal_(model.head.layers.head.weight)
    path = root / 'mini.pth'
    torch.save(dict(state_dict=model.state_dict()), path)
    make_mini_cls(root / 'cls', num_train=3, num_val=9, img_size=64)
    return path


def test_multires_eval_on_mini_cls(checkpoint, tmp_path, capsys):
    out_dir = tmp_path / 'out'
    argv = [MINI_CONFIG, str(checkpoint), '--resolutions', '32', '48', '80',
            '--out-dir', str(out_dir), '--cfg-options',
            f'test_dataloader.dataset.data_root={checkpoint.parent}/cls/',
            'model.backbone.use_ape=True']
    rows = multires_eval.main(argv)
    assert [r['resolution'] for r in rows] == [32, 48, 80]
    assert [r['input'] for r in rows] == ['32x32', '48x48', '80x80']
    for row in rows:
        assert math.isfinite(row['accuracy/top1'])
        assert 0 <= row['accuracy/top1'] <= 100
    with open(out_dir / 'multires.csv') as f:
        table = list(csv.DictReader(f))
    assert [int(r['resolution']) for r in table] == [32, 48, 80]
    saved = json.loads((out_dir / 'multires.json').read_text())
    assert saved['train_resolution'] == 64 and saved['rows'] == rows
    assert '| 48 | 48x48 |' in (out_dir / 'multires.md').read_text()
    with Image.open(out_dir / 'multires.png') as img:
        img.verify()
        assert img.format == 'PNG' and min(img.size) > 100

    capsys.readouterr()
    with pytest.raises(SystemExit):
        multires_eval.main(argv)
    assert 'pass --force' in capsys.readouterr().err
    with pytest.raises(SystemExit):
        multires_eval.main(argv[:2] + ['--resolutions', '36'] + argv[6:] +
                           ['--force'])
    assert 'not multiples of the patch size 8' in capsys.readouterr().err
