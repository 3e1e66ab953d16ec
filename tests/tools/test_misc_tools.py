"""The OpenMMLab-named helper tools: print_config.py, get_flops.py and
browse_dataset.py, run as a user runs them."""
import importlib.util

import numpy as np
import pytest
from PIL import Image

from conftest import REPO, run_tool

VIT_S = 'configs/rope_vit/vit-small-p16_ape_8xb256-400e_in1k.py'


def test_print_config_applies_and_checks_options():
    result = run_tool('tools/misc/print_config.py', VIT_S, '--cfg-options',
                      'model.backbone.arch=tiny')
    assert result.returncode == 0, result.stderr[-2000:]
    assert "arch='tiny'" in result.stdout
    assert "type='IntactCheckpointHook'" in result.stdout  # bases merged
    wrong = run_tool('tools/misc/print_config.py', VIT_S, '--cfg-options',
                     'model.backbone.arhc=tiny')
    assert wrong.returncode == 1
    assert wrong.stderr.strip().splitlines()[-1].startswith(
        'print_config.py: error:')
    assert "did you mean 'arch'" in wrong.stderr


def test_get_flops_counts_a_vit_as_its_formula():
    """ViT-S/16 at 224 px: patch embedding, qkv, attention's two products,
    projection and MLP multiply-adds, plus mmengine's 5 FLOPs per
    LayerNorm element (25 norms over 197 x 384)."""
    spec = importlib.util.spec_from_file_location(
        'get_flops', REPO / 'tools/analysis_tools/get_flops.py')
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    from mmpos.apis import build_backbone
    flops = tool.backbone_flops(build_backbone(REPO / VIT_S).eval(), 224,
                                224)
    t, n, c, layers, heads = 197, 196, 384, 12, 6
    matmuls = n * c * 3 * 16 * 16 + layers * (
        t * c * 3 * c + heads * t * t * 2 * (c // heads) + t * c * c +
        2 * t * c * 4 * c)
    norms = 5 * (2 * layers + 1) * t * c
    assert flops.total() == matmuls + norms
    result = run_tool('tools/analysis_tools/get_flops.py', VIT_S)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == (
        'RoPEVisionTransformer at 224x224: 4.61 GFLOPs, 21.7 M parameters')


@pytest.mark.parametrize('config,task', [
    ('configs/demo/mask-rcnn_vit-tiny-rope-mixed_mini-coco.py', 'coco'),
    ('configs/demo/upernet_vit-tiny-rope-mixed_mini-ade.py', 'ade'),
    ('configs/demo/droppos_vit-tiny-rope-mixed_mini.py', 'unlabeled'),
])
def test_browse_dataset_draws_what_the_pipeline_gives(tmp_path, mini_data,
                                                      config, task):
    out = tmp_path / 'browse'
    result = run_tool('tools/analysis_tools/browse_dataset.py', config,
                      '--num', 2, '--out-dir', out, '--cfg-options',
                      f'train_dataloader.dataset.data_root={mini_data}/'
                      f'{task}/')
    assert result.returncode == 0, result.stderr[-2000:]
    pictures = sorted(out.glob('*.png'))
    assert [p.name[:5] for p in pictures] == ['0000_', '0001_']
    for path in pictures:
        picture = np.asarray(Image.open(path))
        assert picture.ndim == 3 and picture.std() > 10  # drawn, not blank
    assert result.stdout.strip().splitlines()[-1] == (
        f'2 pictures of the train set of {config} in {out}')
