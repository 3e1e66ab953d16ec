"""Every shipped config (all ``configs/**/*.py`` except ``_base_``) loads,
builds its model with the registry of its ``default_scope``, runs its data
pipelines on one real mini-dataset sample, and runs one forward on a tiny
random input on CPU, so that no config can rot.

To stay fast, models are shrunk inside the test (never in the configs), as
:mod:`mmpos_harness.tiny_models` says; dense models and classifiers see
64x64 inputs, pretraining models run in tensor mode.
"""
import ast
import copy
import functools
import inspect
import os.path as osp
from pathlib import Path

import pytest
import torch
from mmengine.config import Config, ConfigDict
from mmengine.dataset import Compose, pseudo_collate

from conftest import REPO
from mmpos_harness.tiny_models import (TINY_SIZE, build_tiny, load,
                                       registries, tiny_inputs)

CONFIGS = sorted(
    str(p.relative_to(REPO)) for p in (REPO / 'configs').rglob('*.py')
    if '_base_' not in p.parts and not (  # model-free dense-probe settings,
        p.parent.name == 'dense_probes' and p.name.startswith(  # see tests/
            ('depth_', 'correspondence_', 'retrieval_'))))  # evaluation/
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


def check_forward(cfg, scope):
    model, model_cfg = build_tiny(cfg, scope)
    data = tiny_inputs(model_cfg, scope)
    if data is None:  # a self-supervised pretraining model: its features
        feats = model(torch.randn(2, 3, TINY_SIZE, TINY_SIZE), mode='tensor')
        feats = feats if isinstance(feats, (tuple, list)) else [feats]
        assert all(torch.isfinite(f).all() for f in feats)
        return
    losses = model(**model.data_preprocessor(data, True), mode='loss')
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
    check_checkpoint_hook(cfg, scope)
    check_pipelines(cfg, scope, mini_data)
    torch.manual_seed(0)
    with torch.no_grad():
        check_forward(cfg, scope)


def check_checkpoint_hook(cfg, scope):
    """The config saves checkpoints with mmpos' IntactCheckpointHook (a
    kill during a save leaves one to resume; mmengine's CheckpointHook with
    ``max_keep_ckpts`` deletes before it writes), built from the config's
    own ``default_hooks.checkpoint`` in its scope."""
    from mmpos.engine.hooks import IntactCheckpointHook
    hook_cfg = (cfg.get('default_hooks') or {}).get('checkpoint')
    assert hook_cfg is not None, 'no default_hooks.checkpoint'
    hook = registries(scope).HOOKS.build(copy.deepcopy(hook_cfg))
    assert isinstance(hook, IntactCheckpointHook), hook_cfg


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
# position schemes: model.backbone.rope / use_ape); the rest ship
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


# --- Structure: short inheritance, no helper computed from a helper, one
# position switch (issue 23 goal 7). ---------------------------------------
ALL_CONFIG_FILES = sorted(
    str(p.relative_to(REPO)) for p in (REPO / 'configs').rglob('*.py'))
MAX_BASE_DEPTH = 3  # detectron2's ViTDet: 1, mmpretrain's MAE: 2


def _assignments(path):
    """``{name: value node}`` of the top-level assignments of a config."""
    found = {}
    for node in ast.parse(Path(path).read_text()).body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                names = target.elts if isinstance(target, ast.Tuple) else [
                    target]
                for name in names:
                    if isinstance(name, ast.Name):
                        found[name.id] = node.value
    return found


def base_paths(path):
    """Absolute paths of the ``_base_`` files of a config (``pkg::`` bases
    resolved to the installed package's config)."""
    node = _assignments(path).get('_base_')
    if node is None:
        return []
    bases = ast.literal_eval(node)
    bases = [bases] if isinstance(bases, str) else bases
    # mmengine's own resolution of relative and `pkg::` bases
    return [osp.realpath(Config._get_cfg_path(b, str(path))[0]
                         if '::' in b else osp.join(osp.dirname(path), b))
            for b in bases]


@functools.lru_cache(maxsize=None)
def base_depth(path):
    """Longest chain of ``_base_`` hops from ``path`` to a file without
    ``_base_``, counting the bases inside mmdet / mmseg / mmpretrain."""
    return max((1 + base_depth(b) for b in base_paths(path)), default=0)


@pytest.mark.parametrize('config', ALL_CONFIG_FILES)
def test_config_inherits_at_most_three_levels(config):
    chain, path = [config], str(REPO / config)
    while base_paths(path):  # the deepest chain, for the message
        path = max(base_paths(path), key=base_depth)
        chain.append(osp.relpath(path, REPO))
    assert base_depth(str(REPO / config)) <= MAX_BASE_DEPTH, ' <- '.join(
        chain)


def _reads_base(node):
    return any(
        isinstance(n, ast.Name) and n.id == '_base_' for n in ast.walk(node))


@pytest.mark.parametrize('config', ALL_CONFIG_FILES)
def test_no_chain_of_base_variables(config):
    """A helper variable a config reads as ``_base_.NAME`` is written out in
    the base that defines it, not computed from that base's own ``_base_``
    (the keys the Runner reads, e.g. ``model``, are merged by mmengine and
    may be read)."""
    from mmengine.runner import Runner
    runner_keys = set(inspect.signature(Runner.__init__).parameters)
    path = REPO / config
    names = {
        n.attr for n in ast.walk(ast.parse(path.read_text()))
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
        and n.value.id == '_base_'
    }
    for name in sorted(names - runner_keys):
        pending, definer = base_paths(str(path)), None
        while pending and definer is None:  # nearest base defining it
            base = pending.pop(0)
            if name in _assignments(base):
                definer = base
            else:
                pending += base_paths(base)
        assert definer is not None, f'{config}: no base defines {name}'
        assert not _reads_base(_assignments(definer)[name]), (
            f'{config} reads _base_.{name}, which '
            f'{osp.relpath(definer, REPO)} computes from its own _base_')


APE_TRANSFER_CONFIGS = [  # those with a RoPE-Mixed twin
    c for c in TRANSFER_CONFIGS
    if '-p16-ape' in c and c.replace('-p16-ape', '-p16-rope-mixed') in CONFIGS
]


@pytest.mark.parametrize('config', APE_TRANSFER_CONFIGS)
def test_position_scheme_is_one_switch(config):
    """Each APE transfer config is its RoPE-Mixed twin with only
    ``model.backbone.rope`` / ``use_ape`` changed (so every position
    scheme is these two keys, e.g. via --cfg-options)."""
    ape = Config.fromfile(str(REPO / config)).to_dict()
    twin = config.replace('-p16-ape', '-p16-rope-mixed')
    rope = Config.fromfile(str(REPO / twin)).to_dict()
    assert (rope['model']['backbone']['rope'],
            rope['model']['backbone']['use_ape']) == (dict(type='mixed'),
                                                      False)
    assert (ape['model']['backbone']['rope'],
            ape['model']['backbone']['use_ape']) == (None, True)
    for cfg in (ape, rope):
        del cfg['model']['backbone']['rope'], cfg['model']['backbone'][
            'use_ape']
    assert ape == rope


# --- ViTDet as detectron2 builds it (issue 22 point 3): what the transfer
# README claims of the shipped LSJ-1024 configs, read off the built model. --
VITDET = 'configs/transfer/mmdet/vitdet_mask-rcnn_vit-base-p16-{}_simple-fpn_lsj-1024_8xb8-12e_coco.py'  # noqa: E501
ICPF_GLOBAL = 'configs/transfer/mmdet/mask-rcnn_vit-base-p16-rope-mixed_simple-fpn_lsj-1024_8xb8-12e_coco.py'  # noqa: E501
LSJ_DETECTORS = {  # config: windowed (ViTDet) or global attention (ICPF B.2)
    VITDET.format('rope-mixed'): True,
    VITDET.format('ape'): True,
    ICPF_GLOBAL: False,
}


@functools.lru_cache(maxsize=None)
def built_detector(config):
    cfg, scope = load(config)
    model = registries(scope).MODELS.build(copy.deepcopy(cfg.model))
    return cfg, model


@pytest.mark.parametrize('config', sorted(LSJ_DETECTORS))
def test_lsj_detector_backbone_is_vitdets(config):
    """No class token and no LayerNorm after the last block (detectron2's
    ViT has neither); ViTDet's decomposed relative position bias in the
    windowed configs with 2 ws - 1 = 27 offsets in windowed blocks and
    2 H - 1 in global ones (H: the grid the backbone is built for), none in
    ICPF's global configs (B.2 drops it)."""
    _, model = built_detector(config)
    backbone = model.backbone
    assert not backbone.with_cls_token and backbone.cls_token is None
    assert not backbone.final_norm and not hasattr(backbone, 'ln1')
    tables = {name: p.shape for name, p in backbone.named_parameters()
              if '.rel_pos_' in name}
    if not LSJ_DETECTORS[config]:
        assert tables == {}
        return
    grid = backbone.patch_resolution
    for i, layer in enumerate(backbone.layers):
        if i in (2, 5, 8, 11):  # global blocks
            rows = (2 * grid[0] - 1, 2 * grid[1] - 1)
        else:
            rows = (2 * 14 - 1, ) * 2
        assert (layer.attn.rel_pos_h.shape[0],
                layer.attn.rel_pos_w.shape[0]) == rows, i
    assert len(tables) == 2 * 12


def test_vitdet_global_tables_follow_the_1024_grid():
    """ViTDet-B at 1024 px: 64 x 64 patches, 2 x 64 - 1 = 127 offsets."""
    _, model = built_detector(VITDET.format('rope-mixed'))
    assert model.backbone.layers[2].attn.rel_pos_h.shape[0] == 127


@pytest.mark.parametrize('config', sorted(LSJ_DETECTORS))
def test_lsj_detector_pads_with_the_mean_colour(config):
    """As detectron2's square_pad: the batch is padded to 1024 x 1024 after
    normalisation with 0 (the mean colour), not with mmdet's raw 114."""
    cfg, model = built_detector(config)
    for loader in ('train_dataloader', 'val_dataloader'):
        steps = [t['type'] for t in cfg[loader].dataset.pipeline]
        assert 'Pad' not in steps, (loader, steps)
    image = torch.randint(0, 256, (3, 40, 60), dtype=torch.uint8)
    from mmdet.structures import DetDataSample
    sample = DetDataSample(metainfo=dict(img_shape=(40, 60)))
    inputs = model.data_preprocessor(
        dict(inputs=[image], data_samples=[sample]), False)['inputs']
    assert inputs.shape == (1, 3, 1024, 1024)
    mean = torch.tensor(cfg.model.data_preprocessor.mean).view(3, 1, 1)
    std = torch.tensor(cfg.model.data_preprocessor.std).view(3, 1, 1)
    torch.testing.assert_close(inputs[0, :, :40, :60],
                               (image.flip(0).float() - mean) / std)
    padded = inputs[0].clone()
    padded[:, :40, :60] = 0
    assert padded.abs().max() == 0


@pytest.mark.parametrize('config', sorted(LSJ_DETECTORS))
def test_lsj_detector_weight_decay_is_vitdets(config):
    """detectron2's get_default_optimizer_params(weight_decay_norm=0) plus
    the pos_embed override: the backbone's nn.LayerNorms and the APE get no
    decay; biases, relative position tables and the pyramid / RoI-head
    LayerNorms (detectron2's channel LayerNorm is no nn.LayerNorm) get the
    full 0.1."""
    from mmengine.optim import build_optim_wrapper
    cfg, model = built_detector(config)
    wrapper = build_optim_wrapper(model, copy.deepcopy(cfg.optim_wrapper))
    decay = {}
    for group in wrapper.optimizer.param_groups:
        for p in group['params']:
            decay[id(p)] = group['weight_decay']
    wd = {name: decay[id(p)] for name, p in model.named_parameters()}
    assert cfg.optim_wrapper.optimizer.weight_decay == 0.1
    expected = {
        'backbone.layers.0.ln1.weight': 0.,
        'backbone.layers.0.ln1.bias': 0.,
        'backbone.layers.0.attn.qkv.weight': 0.1,
        'backbone.layers.0.attn.qkv.bias': 0.1,
        'backbone.patch_embed.projection.bias': 0.1,
    }
    norms = [name for name, p in model.named_parameters()
             if name.startswith(('neck.', 'roi_head.')) and p.ndim == 1]
    assert any(n.startswith('neck.') for n in norms) and any(
        '.ln.' in n for n in norms), norms  # LN2d in the pyramid and heads
    expected.update({name: 0.1 for name in norms})
    if 'backbone.pos_embed' in wd:
        expected['backbone.pos_embed'] = 0.
    if LSJ_DETECTORS[config]:
        expected['backbone.layers.0.attn.rel_pos_h'] = 0.1
    freqs = [name for name in wd if name.endswith('.freqs')]
    expected.update({name: 0. for name in freqs})
    assert {name: wd[name] for name in expected} == pytest.approx(expected)
