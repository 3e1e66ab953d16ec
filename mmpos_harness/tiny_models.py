"""Tiny versions of shipped configs' models, and inputs for them.

A ViT given by an arch name becomes 16 channels per head (same depth and
heads) and every occurrence of its old width in the rest of the model
(neck and head ``in_channels`` ...) follows; in detectors and segmentors,
the neck/head widths of 128..1024 become 32 and R-CNN samplers draw 64
RoIs (:func:`shrink`). Dense models and classifiers see 64x64 inputs
(:func:`det_inputs`, :func:`seg_inputs`, :func:`cls_inputs`).
``tests/test_configs.py`` runs every config through them, and the result
fingerprints (:mod:`mmpos_harness.fingerprint`) probe the configs a result
ran with them.
"""
import copy
import os.path as osp

import torch
from mmengine.config import Config
from mmengine.model import revert_sync_batchnorm
from mmengine.registry import init_default_scope
from mmengine.utils import import_modules_from_strings

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
TINY_HEAD_DIM, TINY_CHANNELS, TINY_SIZE = 16, 32, 64
CHANNEL_KEYS = {
    'in_channels', 'out_channels', 'channels', 'feat_channels',
    'fc_out_channels', 'conv_out_channels'
}


def registries(scope):
    if scope == 'mmdet':
        from mmdet import registry
    elif scope == 'mmseg':
        from mmseg import registry
    else:
        from mmpretrain import registry
    return registry


def _replace(node, new, old=None, keys=None, keep=None):
    """``node`` with ints (also in lists/tuples) replaced by ``new``: those
    equal to ``old``, or, with ``keys``, those in {128, ..., 1024} under one
    of ``keys`` but ``keep``."""
    if isinstance(node, dict):
        for key, value in node.items():
            if keys is None or key in keys or isinstance(value, dict):
                node[key] = _replace(value, new, old, keys, keep)
            elif isinstance(value, list) and all(
                    isinstance(v, dict) for v in value):
                node[key] = [_replace(v, new, old, keys, keep) for v in value]
        return node
    if isinstance(node, (list, tuple)):
        return type(node)(_replace(v, new, old, keys, keep) for v in node)
    if type(node) is int and (node == old if keys is None else node in (
            128, 256, 512, 1024) and node != keep):
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
    """Shrink the model config in place (see the module docstring); a
    frozen teacher's (Distill's ``teacher``) ViT by its own widths."""
    from mmpos.models.backbones.rope_vit import RoPEVisionTransformer
    if isinstance(model_cfg.get('teacher'), dict):
        shrink(model_cfg['teacher'], scope)
    shrink_swin(model_cfg)
    if 'num_queries' in model_cfg:  # DINO's top-k: fewer than the tokens
        model_cfg.num_queries = 20
    # not DETRs (Mask2Former's in its head): neck, transformer and
    # position-encoding widths are tied
    zoo = RoPEVisionTransformer.arch_zoo
    backbone = model_cfg.get('backbone')
    arch = None if not isinstance(backbone, dict) or str(
        backbone.get('arch')).lower() not in zoo or 'Swin' in str(
            backbone.get('type')) else zoo[backbone['arch'].lower()]
    if scope in ('mmdet', 'mmseg') and not any(
            find_dicts(model_cfg, 'positional_encoding')):
        # a ViT-L's 1024 channels in its neck follow the ViT's width below
        _replace(model_cfg, TINY_CHANNELS, keys=CHANNEL_KEYS,
                 keep=arch and arch['embed_dims'])
        for sampler in find_dicts(model_cfg, 'sampler'):
            if 'num' in sampler:
                sampler['num'] = 64
    if arch is None:
        return  # not a ViT by arch name (the mini configs: already tiny)
    width = TINY_HEAD_DIM * arch['num_heads']
    for key, value in model_cfg.items():
        if key != 'backbone':
            model_cfg[key] = _replace(value, width, old=arch['embed_dims'])
    backbone['arch'] = dict(arch, embed_dims=width,
                            feedforward_channels=2 * width)


def find_dicts(node, key):
    """Every dict stored under ``key`` anywhere in ``node``."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key and isinstance(v, dict):
                yield v
            yield from find_dicts(v, key)
    elif isinstance(node, (list, tuple)):
        for v in node:
            yield from find_dicts(v, key)


def load(config: str, root: str = ROOT):
    """``config`` (relative to ``root``) loaded, its ``custom_imports``
    imported and its ``default_scope`` made current: ``(cfg, scope)``."""
    cfg = Config.fromfile(osp.join(root, config))
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
    """The ``num_classes`` of the model config's decode (or classification)
    head, ``default`` where it gives none."""
    for key in ('decode_head', 'head'):
        if isinstance(model_cfg.get(key), dict):
            return model_cfg[key].get('num_classes', default)
    return default


def build_tiny(cfg, scope):
    """``(model, model_cfg)``: the shrunk model config of ``cfg`` (its
    ``data_preprocessor`` added as mmengine's Runner does) and its model,
    built with the registry of ``scope``."""
    model_cfg = copy.deepcopy(cfg.model)
    if cfg.get('data_preprocessor'):
        model_cfg.setdefault('data_preprocessor', cfg.data_preprocessor)
    shrink(model_cfg, scope)
    if scope == 'mmseg' and model_cfg.data_preprocessor.get('size'):
        model_cfg.data_preprocessor.size = (TINY_SIZE, TINY_SIZE)
    if model_cfg.data_preprocessor.get('pad_size_divisor', 1) > TINY_SIZE:
        # ViTDet's square pad to 1024: pad the tiny inputs to their own size
        model_cfg.data_preprocessor.pad_size_divisor = TINY_SIZE
    model = revert_sync_batchnorm(registries(scope).MODELS.build(model_cfg))
    # mmdet's DETRs allocate `level_embed` with torch.Tensor(...) (memory
    # left uninitialised, possibly NaN) and fill it in init_weights(), which
    # would also load the configs' pretrained checkpoints: fill it here.
    if isinstance(getattr(model, 'level_embed', None), torch.Tensor):
        torch.nn.init.normal_(model.level_embed.data)
    return model, model_cfg


def tiny_inputs(model_cfg, scope):
    """A data batch for the model of ``model_cfg`` (:func:`build_tiny`) in
    ``loss`` mode, or None for a self-supervised pretraining model (it
    takes its pipeline's views)."""
    if scope == 'mmdet':
        return det_inputs()
    if scope == 'mmseg':
        return seg_inputs(head_classes(model_cfg, 150))
    if model_cfg.type == 'ImageClassifier':
        return cls_inputs()
    return None
