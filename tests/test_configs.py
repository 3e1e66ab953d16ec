"""Every shipped config (all ``configs/**/*.py`` except ``_base_``) loads,
builds its model with the registry of its ``default_scope``, runs its data
pipelines on one real mini-dataset sample, and runs one forward on a tiny
random input on CPU, so that no config can rot.

To stay fast, models are shrunk inside the test (never in the configs): a ViT
given by an arch name becomes 16 channels per head (same depth and heads) and
every occurrence of its old width in the rest of the model (neck and head
``in_channels`` ...) follows; in detectors and segmentors, the neck/head
widths of 128..1024 become 32 and R-CNN samplers draw 64 RoIs. Dense models
and classifiers see 64x64 inputs, pretraining models run in tensor mode.
"""
import copy
import functools
import os.path as osp
from pathlib import Path

import pytest
import torch
from mmengine.config import Config, ConfigDict
from mmengine.dataset import Compose, pseudo_collate
from mmengine.model import revert_sync_batchnorm
from mmengine.registry import init_default_scope
from mmengine.utils import import_modules_from_strings

from conftest import REPO

CONFIGS = sorted(
    str(p.relative_to(REPO)) for p in (REPO / 'configs').rglob('*.py')
    if '_base_' not in p.parts and not (  # model-free dense-probe settings,
        p.parent.name == 'dense_probes' and p.name.startswith(  # see tests/
            ('depth_', 'correspondence_', 'retrieval_'))))  # evaluation/
TINY_HEAD_DIM, TINY_CHANNELS, TINY_SIZE = 16, 32, 64
CHANNEL_KEYS = {
    'in_channels', 'out_channels', 'channels', 'feat_channels',
    'fc_out_channels', 'conv_out_channels'
}
URL_PREFIXES = ('http://', 'https://', 'open-mmlab://', 'torchvision://')


@pytest.fixture(scope='module', autouse=True)
def fast_setup():
    """Tiny ops: intra-op threads only add overhead (much more on a busy
    machine). Each ``pkg::`` base makes mmengine parse the package's ~200
    metafiles again; they do not change during the tests, so cache them."""
    from mmengine.config import utils
    threads, load_yaml = torch.get_num_threads(), utils.load
    torch.set_num_threads(1)
    utils.load = functools.lru_cache(maxsize=None)(load_yaml)
    yield
    torch.set_num_threads(threads)
    utils.load = load_yaml


def registries(scope):
    if scope == 'mmdet':
        from mmdet import registry
    elif scope == 'mmseg':
        from mmseg import registry
    else:
        from mmpretrain import registry
    return registry


def _replace(node, new, old=None, keys=None):
    """``node`` with ints (also in lists/tuples) replaced by ``new``: those
    equal to ``old``, or, with ``keys``, those in {128, ..., 1024} under one
    of ``keys``."""
    if isinstance(node, dict):
        for key, value in node.items():
            if keys is None or key in keys or isinstance(value, dict):
                node[key] = _replace(value, new, old, keys)
            elif isinstance(value, list) and all(
                    isinstance(v, dict) for v in value):
                node[key] = [_replace(v, new, old, keys) for v in value]
        return node
    if isinstance(node, (list, tuple)):
        return type(node)(_replace(v, new, old, keys) for v in node)
    if type(node) is int and (node == old if keys is None else node in (
            128, 256, 512, 1024)):
        return new
    return node


def shrink_swin(model_cfg):
    """A Swin given by an arch name gets stage widths 8/16/32/64 (8 channels
    per head, depths kept), which the rest of the model follows."""
    from mmpretrain.models.backbones import SwinTransformer
    backbone = model_cfg.get('backbone')
    if not isinstance(backbone, dict) or 'Swin' not in backbone.get(
            'type', '') or not isinstance(backbone.get('arch'), str):
        return
    arch = SwinTransformer.arch_zoo[backbone['arch'].lower()]
    for stage in range(4):
        old = arch['embed_dims'] * 2**stage
        for key, value in model_cfg.items():
            if key != 'backbone':
                model_cfg[key] = _replace(value, 8 * 2**stage, old=old)
    backbone['arch'] = dict(embed_dims=8, depths=arch['depths'],
                            num_heads=[1, 2, 4, 8])


def shrink(model_cfg, scope):
    """Shrink the model config in place (see the module docstring)."""
    from mmpos.models.backbones.rope_vit import RoPEVisionTransformer
    shrink_swin(model_cfg)
    if 'num_queries' in model_cfg:  # DINO's top-k: fewer than the tokens
        model_cfg.num_queries = 20
    # not DETRs (Mask2Former's in its head): neck, transformer and
    # position-encoding widths are tied
    if scope in ('mmdet', 'mmseg') and not any(
            _find(model_cfg, 'positional_encoding')):
        _replace(model_cfg, TINY_CHANNELS, keys=CHANNEL_KEYS)
        for sampler in _find(model_cfg, 'sampler'):
            if 'num' in sampler:
                sampler['num'] = 64
    zoo = RoPEVisionTransformer.arch_zoo
    backbone = model_cfg.get('backbone')
    if not isinstance(backbone, dict) or str(
            backbone.get('arch')).lower() not in zoo or 'Swin' in str(
                backbone.get('type')):
        return  # not a ViT by arch name (the mini configs: already tiny)
    arch = zoo[backbone['arch'].lower()]
    width = TINY_HEAD_DIM * arch['num_heads']
    for key, value in model_cfg.items():
        if key != 'backbone':
            model_cfg[key] = _replace(value, width, old=arch['embed_dims'])
    backbone['arch'] = dict(arch, embed_dims=width,
                            feedforward_channels=2 * width)


def _find(node, key):
    """Every dict stored under ``key`` anywhere in ``node``."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key and isinstance(v, dict):
                yield v
            yield from _find(v, key)
    elif isinstance(node, (list, tuple)):
        for v in node:
            yield from _find(v, key)


def load(config):
    cfg = Config.fromfile(osp.join(REPO, config))
    if cfg.get('custom_imports'):
        import_modules_from_strings(**cfg.custom_imports)
    scope = cfg.get('default_scope', 'mmpretrain')
    init_default_scope(scope)
    return cfg, scope


def det_inputs():
    """Two images with 2 and 3 boxes + masks of classes 0-2."""
    from mmdet.testing import demo_mm_inputs
    return demo_mm_inputs(
        2, [[3, TINY_SIZE, TINY_SIZE]] * 2,
        num_items=[2, 3],
        num_classes=3,
        with_mask=True)


def seg_inputs(num_classes):
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample
    gen = torch.Generator().manual_seed(0)
    samples = []
    for _ in range(2):
        sample = SegDataSample(metainfo=dict(
            img_shape=(TINY_SIZE, TINY_SIZE),
            ori_shape=(TINY_SIZE, TINY_SIZE),
            pad_shape=(TINY_SIZE, TINY_SIZE)))
        sample.gt_sem_seg = PixelData(data=torch.randint(
            0, num_classes, (1, TINY_SIZE, TINY_SIZE), generator=gen))
        samples.append(sample)
    inputs = [torch.randint(0, 256, (3, TINY_SIZE, TINY_SIZE),
                            generator=gen, dtype=torch.uint8)] * 2
    return dict(inputs=inputs, data_samples=samples)


def cls_inputs():
    from mmpretrain.structures import DataSample
    inputs = [torch.randint(0, 256, (3, TINY_SIZE, TINY_SIZE),
                            dtype=torch.uint8)] * 2
    return dict(inputs=inputs,
                data_samples=[DataSample().set_gt_label(i) for i in (0, 1)])


def head_classes(model_cfg, default):
    for key in ('decode_head', 'head'):
        if isinstance(model_cfg.get(key), dict):
            return model_cfg[key].get('num_classes', default)
    return default


def check_forward(cfg, scope):
    model_cfg = copy.deepcopy(cfg.model)
    if cfg.get('data_preprocessor'):  # as mmengine's Runner does
        model_cfg.setdefault('data_preprocessor', cfg.data_preprocessor)
    shrink(model_cfg, scope)
    if scope == 'mmseg' and model_cfg.data_preprocessor.get('size'):
        model_cfg.data_preprocessor.size = (TINY_SIZE, TINY_SIZE)
    model = revert_sync_batchnorm(registries(scope).MODELS.build(model_cfg))
    # mmdet's DETRs allocate `level_embed` with torch.Tensor(...) (memory
    # left uninitialised, possibly NaN) and fill it in init_weights(), which
    # would also load the configs' pretrained checkpoints: fill it here.
    if isinstance(getattr(model, 'level_embed', None), torch.Tensor):
        torch.nn.init.normal_(model.level_embed.data)
    if scope == 'mmdet':
        data = model.data_preprocessor(det_inputs(), True)
        losses = model(**data, mode='loss')
    elif scope == 'mmseg':
        data = model.data_preprocessor(
            seg_inputs(head_classes(model_cfg, 150)), True)
        losses = model(**data, mode='loss')
    elif model_cfg.type == 'ImageClassifier':
        data = model.data_preprocessor(cls_inputs(), True)
        losses = model(**data, mode='loss')
    else:  # a self-supervised pretraining model: its features
        feats = model(torch.randn(2, 3, TINY_SIZE, TINY_SIZE), mode='tensor')
        feats = feats if isinstance(feats, (tuple, list)) else [feats]
        assert all(torch.isfinite(f).all() for f in feats)
        return
    loss, _ = model.parse_losses(losses)
    assert torch.isfinite(loss), losses


def point_at_mini(dataset_cfg, root):
    """The dataset config with its root moved to the mini data (recursing
    into wrappers such as RepeatDataset)."""
    if 'dataset' in dataset_cfg:
        point_at_mini(dataset_cfg.dataset, root)
    else:
        dataset_cfg.data_root = root
    return dataset_cfg


def check_pipelines(cfg, scope, mini_data):
    """Run the train and test pipelines on one real image."""
    loaders = [cfg.get(k) for k in ('train_dataloader', 'val_dataloader')
               if cfg.get(k)]
    assert loaders, 'no dataloader'
    for loader in loaders:
        if scope in ('mmdet', 'mmseg'):
            task = 'coco' if scope == 'mmdet' else 'ade'
            if loader.dataset.get('type') == 'MiniStuffDataset':
                task = 'stuff'  # its own layout (images/{train,val})
            dataset_cfg = point_at_mini(copy.deepcopy(loader.dataset),
                                        f'{mini_data}/{task}/')
            dataset_cfg.serialize_data = False  # its gc.collect() is slow
            if scope == 'mmdet':
                dataset_cfg.metainfo = dict(
                    classes=('circle', 'square', 'triangle'))
            dataset = registries(scope).DATASETS.build(dataset_cfg)
            item = dataset[0]
        else:
            pipeline = Compose(loader.dataset.pipeline)
            image = sorted(Path(mini_data, 'unlabeled').rglob('*.jpg'))[0]
            item = pipeline(dict(img_path=str(image), gt_label=0))
        assert item is not None and 'inputs' in item, item
        batch = pseudo_collate([item])
        assert batch['inputs'], batch


@pytest.mark.parametrize('config', CONFIGS)
def test_config_builds_and_runs(config, mini_data):
    cfg, scope = load(config)
    assert scope in ('mmdet', 'mmseg', 'mmpretrain'), scope
    text = cfg.pretty_text
    for prefix in URL_PREFIXES:
        assert prefix not in text, f'{config} would download ({prefix})'
    check_pipelines(cfg, scope, mini_data)
    torch.manual_seed(0)
    with torch.no_grad():
        check_forward(cfg, scope)


TRANSFER_CONFIGS = [c for c in CONFIGS if c.startswith('configs/transfer/')]


@pytest.mark.parametrize('config', TRANSFER_CONFIGS)
def test_transfer_config_takes_one_checkpoint_variable(config):
    """The pretrained checkpoint is model.backbone.init_cfg.checkpoint."""
    cfg, _ = load(config)
    init_cfg = cfg.model.backbone.init_cfg
    assert isinstance(init_cfg, ConfigDict), init_cfg
    assert init_cfg == dict(type='Pretrained', checkpoint=None,
                            prefix='backbone.')
    assert cfg.get('load_from') is None
    assert 'model.backbone.init_cfg.checkpoint' in (REPO / config).read_text()


# Paper-specific ViT protocols ship the variants their paper uses (other
# position schemes: model.backbone.rope_type / use_ape); the rest ship
# ViT-S/16 and ViT-B/16, each APE and RoPE-Mixed.
PAPER_PROTOCOLS = {
    'vitdet_mask-rcnn_*_simple-fpn_lsj-1024_8xb8-12e_coco.py':
    {'vit-base-p16-rope-mixed', 'vit-base-p16-ape'},
    'vitdet_mask-rcnn_*_mln-fpn_lsj-1024_8xb2-12e_coco.py': {'vit-base-p16-ape'},
    'dino-4scale_*_vitdet_8xb2-12e_coco.py': {'vit-base-p16-rope-mixed'},
}


def test_transfer_grid_is_complete():
    """ViT-S/16 and ViT-B/16, each APE and RoPE-Mixed, for every general
    protocol; the paper-specific ones as listed."""
    protocols = {}
    for config in TRANSFER_CONFIGS:
        name = Path(config).name
        for variant in ('vit-base-p16-rope-mixed', 'vit-small-p16-rope-mixed',
                        'vit-base-p16-ape', 'vit-small-p16-ape'):
            if variant in name:
                protocols.setdefault(name.replace(variant, '*'),
                                     set()).add(variant)
    general = {k: v for k, v in protocols.items()
               if k not in PAPER_PROTOCOLS}
    assert len(general) == 10, sorted(general)
    assert all(len(v) == 4 for v in general.values()), general
    for protocol, variants in PAPER_PROTOCOLS.items():
        assert protocols.get(protocol) == variants, protocol


@pytest.mark.parametrize('config', TRANSFER_CONFIGS)
def test_auto_scale_lr_is_the_real_total_batch(config):
    """``auto_scale_lr.base_batch_size`` = GPUs x per-GPU batch of the
    config's ``<gpus>xb<batch>`` name, and the per-GPU batch is the
    dataloader's: --auto-scale-lr then rescales from the right batch."""
    import re
    cfg, _ = load(config)
    gpus, batch = map(int, re.search(r'_(\d+)xb(\d+)', config).groups())
    assert cfg.train_dataloader.batch_size == batch
    assert cfg.auto_scale_lr.base_batch_size == gpus * batch
