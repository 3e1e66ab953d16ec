"""tools/analysis_tools/get_flops.py measures what a config runs (issue 58):
a pretraining config's unmasked backbone at its input size (DropPos' masking
``MAERoPEViT`` counted on all its patches), and an mmseg / mmdet config's
whole segmentor / detector, equal to mmseg's and mmdet's own ``get_flops``
(their ``inference`` functions, called in this process on the same config,
input and weights) plus the attention products those leave out."""
import importlib.util
import os.path as osp
from argparse import Namespace

import pytest
import torch
from mmengine.logging import MMLogger

from conftest import REPO, data_root_options, load_tool

DROPPOS = 'configs/droppos/droppos_vit-tiny_mini.py'
SEGMENTOR = 'configs/demo/upernet_vit-tiny-rope-mixed_mini-ade.py'
DETECTOR = 'configs/demo/mask-rcnn_vit-tiny-rope-mixed_mini-coco.py'


@pytest.fixture(scope='module')
def tool():
    return load_tool('get_flops')


def openmmlab_tool(package):
    """``tools/analysis_tools/get_flops.py`` that mmdet / mmseg install
    (``<package>/.mim``), as a module."""
    module = importlib.import_module(package)
    path = osp.join(osp.dirname(module.__file__), '.mim', 'tools',
                    'analysis_tools', 'get_flops.py')
    if not osp.isfile(path):
        pytest.skip(f'{package} was installed without its tools')
    spec = importlib.util.spec_from_file_location(f'{package}_get_flops',
                                                  path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    tool._format_size = int  # the raw count instead of '1.08G'
    return tool


def seeded(build):
    def wrapper(*args, **kwargs):
        torch.manual_seed(0)
        return build(*args, **kwargs)
    return wrapper


def seed_first_build(monkeypatch, registry):
    """Seed ``registry.build``'s next call as :func:`seeded` does, not the
    nested builds of its submodules."""
    build = registry.build

    def first(*args, **kwargs):
        monkeypatch.setattr(registry, 'build', build)
        return seeded(build)(*args, **kwargs)
    monkeypatch.setattr(registry, 'build', first)


def without_attention(flops):
    """The total less ``scaled_dot_product_attention``, which mmengine's
    counter (and so mmdet's and mmseg's tools) has no handle for."""
    return flops.total() - flops.by_operator().get(
        'scaled_dot_product_attention', 0)


def test_pretraining_config_counts_the_unmasked_backbone(tool):
    """DropPos' ViT-tiny at 32 px, patch 8: all 16 patches and the class
    token (the masked forward keeps 4): patch embedding, qkv, attention's
    two products, projection and MLP multiply-adds, plus mmengine's 5
    FLOPs per LayerNorm element."""
    from mmpos.guardrails.launch import load_config
    model, shape, flops = tool.measure(load_config(str(REPO / DROPPOS)))
    assert type(model).__name__ == 'RoPEVisionTransformer'
    assert shape == (32, 32)
    t, n, c, layers, heads, mlp = 17, 16, 96, 4, 3, 384
    matmuls = n * c * 3 * 8 * 8 + layers * (
        t * c * 3 * c + heads * t * t * 2 * (c // heads) + t * c * c +
        2 * t * c * mlp)
    assert flops.total() == matmuls + 5 * (2 * layers + 1) * t * c


def test_segmentor_equals_mmseg_get_flops(tool, monkeypatch):
    """mmseg 1.2.2's tool passes both ``input_shape`` and ``inputs`` to
    mmengine 0.10's ``get_model_complexity_info``, which refuses that: the
    call is given ``inputs`` only (its shape is ``input_shape``)."""
    from mmengine.analysis import get_model_complexity_info

    from mmpos.guardrails.launch import load_config
    cfg = load_config(str(REPO / SEGMENTOR))
    model, shape, flops = tool.measure(cfg)
    assert type(model).__name__ == 'EncoderDecoder' and shape == (128, 128)
    mmseg_tool = openmmlab_tool('mmseg')
    monkeypatch.setattr(
        mmseg_tool, 'get_model_complexity_info',
        lambda model, input_shape, **kwargs: get_model_complexity_info(
            model, None, **kwargs))
    theirs = mmseg_tool.inference(
        Namespace(config=str(REPO / SEGMENTOR), shape=list(shape),
                  cfg_options=None), MMLogger.get_current_instance())
    assert flops.by_operator()['scaled_dot_product_attention'] > 0
    assert without_attention(flops) == theirs['flops']
    assert tool.parameter_count(model)[''] == theirs['params']


def test_detector_equals_mmdet_get_flops(tool, mini_data, monkeypatch):
    """On the first val image (its proposals set the RoI heads' work) and
    the same random weights (both builds seeded). mmdet's tool rewrites the
    RoI heads' norms to SyncBN when a config has a ``head_norm_cfg`` (as
    some of mmdet's own configs mean it); ours sets that variable to LN2d,
    which the heads already use: the tool reads the config without it, so
    both count the config's model."""
    from mmengine.runner import Runner

    from mmpos.guardrails.launch import load_config
    options = dict(option.split('=', 1)
                   for option in data_root_options(mini_data, 'coco'))
    mmdet_tool = openmmlab_tool('mmdet')
    seed_first_build(monkeypatch, mmdet_tool.MODELS)

    read = mmdet_tool.Config.fromfile

    class Config(mmdet_tool.Config):
        @staticmethod
        def fromfile(*args, **kwargs):
            cfg = read(*args, **kwargs)
            cfg.pop('head_norm_cfg')
            return cfg
    monkeypatch.setattr(mmdet_tool, 'Config', Config)
    theirs = mmdet_tool.inference(
        Namespace(config=str(REPO / DETECTOR), num_images=1,
                  cfg_options=options), MMLogger.get_current_instance())

    cfg = load_config(str(REPO / DETECTOR), options)
    cfg.val_dataloader.batch_size = 1
    batch = next(iter(Runner.build_dataloader(cfg.val_dataloader)))
    model = seeded(tool.build_whole_model)(cfg)
    data = model.data_preprocessor(batch, False)
    flops = tool.whole_model_flops(model, data)
    assert tuple(data['inputs'].shape[-2:]) == tool.inference_size(cfg)
    assert without_attention(flops) == theirs['flops']
    assert tool.parameter_count(model)[''] == theirs['params']
