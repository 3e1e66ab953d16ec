"""mmpos is importable, registers into mmpretrain, and is reachable from
mmdet/mmseg configs through the ``mmpretrain.`` scope prefix."""
import os.path as osp

import pytest
import torch
from mmengine.config import Config

import mmpos
from mmpos.registry import MODELS, OPTIM_WRAPPER_CONSTRUCTORS


def test_version():
    assert isinstance(mmpos.__version__, str)
    assert mmpos.__version__.count('.') == 2


def test_registered_in_mmpretrain():
    from mmpretrain.registry import MODELS as PRETRAIN_MODELS
    assert MODELS is PRETRAIN_MODELS
    for name in ('SimpleFeaturePyramid', 'DeconvMultiLevelNeck',
                 'RoPEVisionTransformer'):
        assert PRETRAIN_MODELS.get(name) is not None, name
    assert OPTIM_WRAPPER_CONSTRUCTORS.get(
        'LayerDecayOptimWrapperConstructor') is not None


def test_custom_imports_make_modules_buildable_from_mmdet_and_mmseg(
        tmp_path):
    cfg_file = tmp_path / 'cfg.py'
    cfg_file.write_text(
        "custom_imports = dict(imports=['mmpos'], allow_failed_imports=False)\n"
        "neck = dict(type='mmpretrain.SimpleFeaturePyramid', in_channels=32,"
        " out_channels=16)\n")
    cfg = Config.fromfile(str(cfg_file))
    from mmdet.registry import MODELS as DET_MODELS
    from mmseg.registry import MODELS as SEG_MODELS
    for registry in (DET_MODELS, SEG_MODELS):
        neck = registry.build(cfg.neck)
        assert type(neck).__name__ == 'SimpleFeaturePyramid'


def test_simple_feature_pyramid_strides():
    neck = MODELS.build(
        dict(type='SimpleFeaturePyramid', in_channels=32, out_channels=16))
    outs = neck((torch.randn(2, 32, 8, 12), ))
    assert [tuple(o.shape) for o in outs] == [(2, 16, 32, 48),
                                              (2, 16, 16, 24),
                                              (2, 16, 8, 12), (2, 16, 4, 6),
                                              (2, 16, 2, 3)]


def test_deconv_multi_level_neck_keeps_width():
    neck = MODELS.build(
        dict(type='DeconvMultiLevelNeck', in_channels=32,
             norm_cfg=dict(type='BN')))
    feats = tuple(torch.randn(2, 32, 8, 8) for _ in range(4))
    outs = neck(feats)
    assert [tuple(o.shape[1:]) for o in outs] == [(32, 32, 32), (32, 16, 16),
                                                  (32, 8, 8), (32, 4, 4)]
    with pytest.raises(ValueError, match='expects 4 feature maps'):
        neck(feats[:3])


def test_no_class_named_like_an_mmdet_or_mmseg_class():
    """A config's ``type='X'`` means one class: no module mmpos registers
    (into mmpretrain's registries, where a clash with mmpretrain could not
    register at all) shares its name with one registered in the same
    registry of mmdet or mmseg (mmseg's ``MultiLevelNeck`` takes a list of
    widths and an ``out_channels``; ours is ``DeconvMultiLevelNeck``)."""
    import importlib
    import pkgutil

    import mmdet.registry
    import mmpretrain.registry
    import mmseg.registry
    from mmdet.utils import register_all_modules as register_mmdet
    from mmengine.registry import Registry
    from mmseg.utils import register_all_modules as register_mmseg
    register_mmdet(init_default_scope=False)
    register_mmseg(init_default_scope=False)
    for module in pkgutil.walk_packages(mmpos.__path__, 'mmpos.'):
        importlib.import_module(module.name)
    clashes, checked = set(), set()
    for name in dir(mmpretrain.registry):
        ours = getattr(mmpretrain.registry, name)
        if not isinstance(ours, Registry):
            continue
        for key, cls in ours.module_dict.items():
            if not getattr(cls, '__module__', '').startswith('mmpos.'):
                continue
            checked.add(f'{name}.{key}')
            for lib in (mmdet.registry, mmseg.registry):
                theirs = getattr(lib, name, None)
                if theirs is not None and key in theirs.module_dict:
                    clashes.add(f'{name}.{key} ({lib.__name__})')
    assert 'MODELS.DeconvMultiLevelNeck' in checked
    assert 'MultiLevelNeck' in mmseg.registry.MODELS.module_dict
    assert 'MODELS.DINOProjectionHead' in checked  # not mmdet's DINOHead
    assert not clashes, clashes


def test_layer_decay_constructor_for_detectors():
    """Block i of the backbone gets rate**(L+1-i); necks/heads get 1."""
    from mmdet.registry import MODELS as DET_MODELS
    from mmengine.optim import build_optim_wrapper
    cfg = Config.fromfile(
        osp.join(osp.dirname(__file__), '..', 'configs', 'demo',
                 'mask-rcnn_vit-tiny-rope-mixed_mini-coco.py'))
    model = DET_MODELS.build(cfg.model)
    wrapper = build_optim_wrapper(
        model,
        dict(
            type='OptimWrapper',
            constructor='mmpretrain.LayerDecayOptimWrapperConstructor',
            optimizer=dict(type='AdamW', lr=1.0, weight_decay=0.05),
            paramwise_cfg=dict(layer_decay_rate=0.5)))
    scales = {
        g['param_name']: g['lr_scale']
        for g in wrapper.optimizer.param_groups
    }
    num_layers = len(model.backbone.layers)
    assert scales['backbone.layers.0.ln1.weight'] == 0.5**num_layers
    last = f'backbone.layers.{num_layers - 1}.ln1.weight'
    assert scales[last] == 0.5
    assert scales['rpn_head.rpn_cls.weight'] == 1.0
