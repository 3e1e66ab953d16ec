"""Shared fixtures: mini datasets generated once per session, and a runner
for the command-line tools."""
import importlib.util
import json
import math
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The mini config of every pretraining algorithm.
PRETRAIN_MINI_CONFIGS = {
    'droppos': 'configs/droppos/droppos_vit-tiny_mini.py',
    'qbheat': 'configs/qbheat/qbheat_mobileformer-285m_mini.py',
    'cr2pq': 'configs/cr2pq/cr2pq_vit-tiny_mini.py',
    'dinov2': 'configs/dinov2/dinov2_vit-tiny_mini.py',
    'icpf': 'configs/icpf/icpf_vit-tiny_mini.py',
}
# Options a position scheme of mmpos_positions.SCHEMES needs in the tests'
# tiny ViTs (8- or 16-channel heads; default: none): ComRoPE's and LieRE's
# default blocks are larger than such a head.
SMALL_HEAD_SCHEME_OPTIONS = dict(comrope=dict(block_size=8),
                                 liere=dict(block_size=8))


def _restore_current_instances():
    from mmengine.logging import MMLogger
    from mmengine.registry import DefaultScope
    saved = {cls: dict(cls._instance_dict) for cls in (DefaultScope, MMLogger)}
    yield
    for cls, instances in saved.items():
        cls._instance_dict.clear()
        cls._instance_dict.update(instances)


@pytest.fixture(autouse=True)
def isolate_current_instances():
    """Runners and ``init_default_scope`` set mmengine's *current* default
    scope and logger globally: registries resolve names in the scope, and
    ``print_log(logger='current')`` writes to the logger, whose console
    handler holds the ``sys.stdout`` of the test that made it (closed after
    a ``capsys`` test). Restore both after each test so no test depends on
    which ran before it in its worker."""
    yield from _restore_current_instances()


@pytest.fixture(autouse=True, scope='session')
def fingerprint_store(tmp_path_factory):
    """Results the tests record (``mmpos_harness.provenance.record``) keep
    their fingerprints in a temporary folder, not in the repository's
    ``results/fingerprints`` (subprocesses inherit it)."""
    store = tmp_path_factory.mktemp('fingerprints')
    saved = os.environ.get('MMPOS_FINGERPRINT_STORE')
    os.environ['MMPOS_FINGERPRINT_STORE'] = str(store)
    yield store
    if saved is None:
        del os.environ['MMPOS_FINGERPRINT_STORE']
    else:
        os.environ['MMPOS_FINGERPRINT_STORE'] = saved


@pytest.fixture(autouse=True, scope='module')
def isolate_module_current_instances():
    """The same after each module: module fixtures build runners too, and
    a scope or logger they leave would outlive the per-test restore."""
    yield from _restore_current_instances()


@pytest.fixture(scope='session')
def mini_data(tmp_path_factory):
    """``{coco,ade,unlabeled,cls}`` mini datasets, small enough for CPU
    tests (``cls``: the online kNN probe set of the mini pretraining
    configs), and a 2 + 2 image mini-stuff (for the demo's segmentation
    config)."""
    from mmpos_harness.mini_data import make_all, make_mini_stuff
    root = tmp_path_factory.mktemp('mini') / 'data'
    make_all(str(root), ('coco', 'ade', 'unlabeled', 'cls'), num_train=48,
             num_val=16, num_unlabeled=64, img_size=128, seed=0)
    make_mini_stuff(str(root / 'stuff'), num_train=2, num_val=2)
    return root



@pytest.fixture(scope='session')
def dense_mini(tmp_path_factory):
    """Tiny mini-NYU, mini-SPair and mini-stuff at 32 px for the dense
    probes' tests."""
    from mmpos_harness.mini_data import (make_mini_nyu, make_mini_spair,
                                     make_mini_stuff)
    root = tmp_path_factory.mktemp('dense_mini')
    make_mini_nyu(str(root / 'nyu'), num_train=6, num_val=3, img_size=32)
    make_mini_spair(str(root / 'spair'), num_train=1, num_val=3, img_size=32)
    make_mini_stuff(str(root / 'stuff'), num_train=6, num_val=3, img_size=32)
    return root

def runner_steps(cfg, model, steps, batches=1):
    """``steps`` training iterations of ``model`` in this process as
    mmengine's Runner loops take them (``model.train_step`` with the
    config's optimizer wrapper, then its iteration-based schedulers: the
    warm-up), cycling over the first ``batches`` batches of the config's
    train dataloader. Python's, numpy's and torch's generators are seeded
    (0) before the loader is built, and torch's again before each step, so
    the batch and the step's own draws (DINO's denoising noise, masks,
    drop-path) do not depend on which tests ran before in the process and
    successive losses measure one objective. Returns the losses."""
    import torch
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import PARAM_SCHEDULERS
    from mmengine.runner import Runner, set_random_seed
    set_random_seed(0)
    loader = Runner.build_dataloader(cfg.train_dataloader, seed=0)
    data = [batch for batch, _ in zip(loader, range(batches))]
    optim_wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    schedulers = [PARAM_SCHEDULERS.build(dict(s, optimizer=optim_wrapper))
                  for s in cfg.param_scheduler if not s.get('by_epoch', True)]
    model.train()
    losses = []
    for i in range(steps):
        torch.manual_seed(0)
        losses.append(float(model.train_step(data[i % batches],
                                             optim_wrapper)['loss']))
        for scheduler in schedulers:
            scheduler.step()
    return losses


def config_model(config, data_roots):
    """The config ``config`` with its ``<split>_dataloader``'s data roots
    replaced (``data_roots``: ``{split: path}``) and its model, built in
    its default scope, seeded (0) and initialised."""
    import torch
    from mmengine.config import Config
    from mmengine.registry import MODELS, init_default_scope
    cfg = Config.fromfile(config)
    for split, root in data_roots.items():
        cfg[f'{split}_dataloader'].dataset.data_root = root
    init_default_scope(cfg.default_scope)
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    return cfg, model


def first_val_metrics(cfg, model):
    """The config's evaluator (mmdet's CocoMetric, mmseg's IoUMetric ...)
    on the model's predictions for the first validation batch."""
    import torch
    from mmengine.evaluator import Evaluator
    from mmengine.runner import Runner
    loader = Runner.build_dataloader(cfg.val_dataloader, seed=0)
    evaluator = Evaluator(cfg.val_evaluator)
    evaluator.dataset_meta = loader.dataset.metainfo
    batch = next(iter(loader))
    model.eval()
    with torch.no_grad():
        evaluator.process(model.val_step(batch), batch)
    return evaluator.evaluate(len(batch['inputs']))


def run_tool(*args, timeout=600, env=None):
    """Run ``python <args>`` from the repo root; returns CompletedProcess."""
    return subprocess.run([sys.executable, *map(str, args)],
                          cwd=REPO,
                          capture_output=True,
                          text=True,
                          timeout=timeout,
                          env={**os.environ, **(env or {})})


def data_root_options(mini_data, task):
    """``--cfg-options`` pointing a demo config at the session's mini data."""
    root = f'{mini_data}/{task}/'
    options = [f'{split}_dataloader.dataset.data_root={root}'
               for split in ('train', 'val', 'test')]
    if task == 'coco':
        ann = f'{root}annotations/instances_val2017.json'
        options += [f'val_evaluator.ann_file={ann}',
                    f'test_evaluator.ann_file={ann}']
    return options


def finetune(config, work_dir, checkpoint, options, iters=20,
             log_interval=5):
    """Fine-tune ``config`` (tools/train.py, mmengine's Runner) for
    ``iters`` iterations from the backbone ``checkpoint``, then validate
    once. Checks the run, that one finite loss is logged per
    ``log_interval`` iterations and that the evaluator reported; returns
    the console log, the logged losses and the metrics record."""
    result = run_tool(
        'tools/train.py', config, '--work-dir', work_dir, '--cfg-options',
        *options, f'model.backbone.init_cfg.checkpoint={checkpoint}',
        f'train_cfg.max_iters={iters}', f'train_cfg.val_interval={iters}',
        f'default_hooks.logger.interval={log_interval}', timeout=900)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    records = read_scalars(work_dir)
    losses = [r['loss'] for r in records if 'loss' in r]
    metrics = [r for r in records if 'loss' not in r and 'lr' not in r]
    assert len(losses) == iters // log_interval, records
    assert all(math.isfinite(v) for v in losses), losses
    assert metrics, f'no validation record in {records[-3:]}'
    return result.stdout + result.stderr, losses, metrics[-1]


def read_scalars(work_dir):
    """All records of mmengine's ``vis_data/scalars.json`` under work_dir."""
    files = sorted(Path(work_dir).glob('*/vis_data/scalars.json'))
    assert files, f'no scalars.json under {work_dir}'
    return [json.loads(line) for line in files[-1].read_text().splitlines()]


def start_ema_teachers(model):
    """What ``EMATeacherHook`` does before training: copy the student into
    each EMA teacher of ``model`` (its step 0); returns ``model``."""
    from types import SimpleNamespace

    from mmpos.engine.hooks import EMATeacherHook
    EMATeacherHook().before_train(SimpleNamespace(model=model))
    return model


def ema_teacher_step(model):
    """``EMATeacherHook``'s update after an optimizer step."""
    from types import SimpleNamespace

    from mmpos.engine.hooks import EMATeacherHook
    EMATeacherHook().after_train_iter(SimpleNamespace(model=model), 0)


def assert_cosine_ema_steps(step, student, teacher, momentum, max_iters=8):
    """Two more ``step()`` calls after the first (which copies the student,
    checked here), the student shifted by 1 before each: the teacher must
    become ``(1 - m) teacher + m student`` with mmpretrain's ``CosineEMA``
    ``m = momentum (cos(pi k / max_iters) + 1) / 2`` at step ``k``."""
    import torch
    assert torch.equal(student, teacher)
    for k in (1, 2):
        before = teacher.detach().clone()
        with torch.no_grad():
            student.add_(1.)
        step()
        m = momentum * (math.cos(math.pi * k / max_iters) + 1) / 2
        assert torch.allclose(teacher, (1 - m) * before + m * student.detach(),
                              atol=1e-6)


# Tiny DINOv2 / ICPF models and multi-crop batches (tests/models/selfsup/
# dinov2/ and icpf/): 2 global 32 px and 2 local 16 px views per image.
DINO_BACKBONE = dict(
    type='RoPEVisionTransformer',
    arch=dict(embed_dims=48, num_layers=2, num_heads=3,
              feedforward_channels=96),
    img_size=32,
    patch_size=8,
    rope=None,
    use_ape=True,
    out_type='raw',
    drop_path_rate=0.1)
DINO_HEAD = dict(type='DINOProjectionHead', in_channels=48, out_channels=64,
                 hidden_channels=64, bottleneck_channels=16)
# (x1, y1, x2, y2) crop boxes of the 4 views (the second one flipped)
DINO_CROP_BOXES = ((0., 0., 1., 1.), (.6, .1, .1, .7), (.2, .2, .5, .5),
                   (.5, .6, .9, .9))


def build_dino(cls=None, **kwargs):
    """``cls`` (default ``ICPF``) on :data:`DINO_BACKBONE` with
    :data:`DINO_HEAD` as image and patch head: seeded, initialised, in
    training mode, its EMA teachers started."""
    import torch

    from mmpos.models.selfsup.icpf import ICPF
    torch.manual_seed(0)
    model = (cls or ICPF)(backbone=DINO_BACKBONE, head=DINO_HEAD,
                          patch_head=DINO_HEAD, **kwargs)
    model.init_weights()
    return start_ema_teachers(model.train())


def dino_batch(num=4):
    """``num`` random images as the 4 views and their data samples with
    :data:`DINO_CROP_BOXES`."""
    import torch
    from mmpretrain.structures import DataSample
    inputs = [torch.randn(num, 3, 32, 32) for _ in range(2)] + \
        [torch.randn(num, 3, 16, 16) for _ in range(2)]
    boxes = torch.tensor(DINO_CROP_BOXES)
    return inputs, [DataSample(metainfo=dict(crop_boxes=boxes))
                    for _ in range(num)]


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def weight_decays(model, optim_wrapper):
    """``{parameter name: weight decay}`` that a config's ``optim_wrapper``
    (its optimizer and ``paramwise_cfg``) gives ``model``'s trainable
    parameters, built with mmengine's default constructor."""
    from mmengine.optim import build_optim_wrapper
    wrapper = build_optim_wrapper(model, dict(
        type='OptimWrapper', optimizer=optim_wrapper.optimizer,
        paramwise_cfg=optim_wrapper.get('paramwise_cfg')))
    decay = {id(p): g['weight_decay'] for g in wrapper.optimizer.param_groups
             for p in g['params']}
    return {name: decay[id(p)] for name, p in model.named_parameters()
            if p.requires_grad}


def load_tool(name, folder='analysis_tools'):
    """The module of ``tools/<folder>/<name>.py``."""
    path = REPO / 'tools' / folder / f'{name}.py'
    spec = importlib.util.spec_from_file_location(f'tool_{name}', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
