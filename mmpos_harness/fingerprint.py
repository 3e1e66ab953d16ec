"""Behavioural fingerprints: whether the code a result measured still
computes what it computed then.

A result's provenance record (:mod:`mmpos_harness.provenance`) lists the
paths it depends on. Its fingerprint is what short, fixed-seed,
single-threaded *probes* of those paths output, stored once per distinct
set in ``results/fingerprints/<id>.json`` (the record keeps the id):

* ``config:<path>``, for every config of ``depends`` outside ``_base_``:
  the resolved config (``_base_`` chain applied; a digest) and, where it
  has a model, that model shrunk as :mod:`mmpos_harness.tiny_models` does,
  trained for :data:`STEPS` steps with the config's own optimizer wrapper
  (AMP off; its :data:`MODEL_HOOKS` around the steps) on a batch of its
  own train pipeline (pretraining and
  classification) or tiny detection / segmentation inputs: the logged
  losses of each step, three sums of the parameters after the steps and
  the backbone's eval-mode outputs;
* ``scheme:<name>``, for every position scheme the result builds
  (:func:`mmpos_harness.provenance.built_schemes`): a 2-block RoPE ViT with
  a register token on a non-square input, global and windowed, its outputs
  and gradients, and its eval outputs at another size;
* ``bench:<module>:<quick|full>``, for the benchmark modules of
  :data:`BENCH_PROBES` in ``depends``: the module run as ``run.py`` runs
  it at the command's sizes, each timed step called once (its modules'
  outputs) and its rows from stand-in times (:func:`bench_probe`);
* ``rehearsal:<path>``, for every such config of a result whose
  ``depends`` hold the rehearsal harness: what a rehearsal of it changes
  and writes (:func:`rehearsal_probe`);
* ``stats``, ``timing``, ``mini_data``, ``evaluation``, ``dense_suite``,
  ``position_study``: the statistics module, the benchmarks' timing and
  summary helpers, the mini datasets, the frozen evaluators (kNN, depth,
  correspondence, retrieval, token health), the dense-probe suite at a
  tiny size and the resolution study's
  harness (without positions and APE: a scheme is its own probe), on fixed
  inputs, for results whose ``depends`` hold them.

While a probe runs, the repository files whose functions it calls are
noted. The files of ``depends`` that the result's probes reach
(:func:`text_judged`: those they call, the library's ``__init__.py``
files, the model files, and the training loop's files for a result that
ran no config) are judged by behaviour; the rest of ``depends``
(e.g. a tool's command line, a hook no probe runs) by text: their content
now against the record's commit.

Files moved since (``git diff -M``: a rename, perhaps with edits) keep
what judged them: a file a probe reached is still judged by that probe,
whose outputs are compared with the moved files' paths and module names
read as they were (a table that cites the module that computed it); a
text-judged file that changed only the names of moved modules (its
imports, the references in its docstrings) has the code it had
(:func:`~mmpos_harness.provenance.moved_only`); the probes a record calls
for are those of its ``depends`` where they live now.

:func:`status`: a result is ``current`` when every probe gives its stored
values again (numbers within :data:`RTOL`: the same computation in another
order; a sum near 0 within :data:`RTOL` of its entries' norm; digests
equal) and no text-judged file changed, ``stale`` otherwise (with the
probes and files that changed), ``unknown`` when the record has no
fingerprint or its commit is not in the clone. Probes are compared only
on the CPU model and torch that fingerprinted them; elsewhere the text
alone judges (stale, or unknown: :func:`status`).
``tools/misc/results_status.py`` lists them; the pages mark a stale result
(``results/status.json``).
"""
import copy
import functools
import hashlib
import importlib
import inspect
import json
import math
import os
import os.path as osp
import random
import subprocess
import sys
import tempfile
import threading
from types import SimpleNamespace
from typing import Callable, Dict, Iterable, List, Tuple

import numpy as np
import torch
from mmengine.logging import MessageHub, MMLogger

from mmpos_harness import provenance

ROOT = provenance.ROOT
STORE = 'results/fingerprints'
STATUS = 'results/status.json'
# the stored result files (their provenance records)
RESULT_GLOBS = ('results/**/*.json', 'benchmarks/results/*.json')
STEPS = 2
RTOL, ATOL = 1e-4, 1e-6
_LOCK = threading.RLock()


def _summary(tensors: Iterable[torch.Tensor], prefix: str) -> dict:
    """Three numbers that change with any entry of ``tensors``: their sum,
    sum of squares and a sum weighted by ``cos(index)`` (float64)."""
    flat = torch.cat([t.detach().double().flatten() for t in tensors])
    weights = torch.cos(torch.arange(flat.numel(), dtype=torch.float64))
    return {f'{prefix}.sum': flat.sum().item(),
            f'{prefix}.sq': flat.square().sum().item(),
            f'{prefix}.cos': (flat * weights).sum().item()}


def _tensors(node) -> List[torch.Tensor]:
    """Every tensor in nested tuples, lists and dicts, in order."""
    if isinstance(node, torch.Tensor):
        return [node]
    if isinstance(node, dict):
        node = [node[k] for k in sorted(node)]
    if isinstance(node, (list, tuple)):
        return [t for item in node for t in _tensors(item)]
    return []


def _numbers(node, prefix: str) -> dict:
    """The numbers in nested dicts and lists as ``{path: float}`` (compared
    within :data:`RTOL`, not as a digest: the same computation in another
    order stays equal); strings and None are left out."""
    if isinstance(node, dict):
        return {k: v for key in sorted(node, key=str)
                for k, v in _numbers(node[key], f'{prefix}.{key}').items()}
    if isinstance(node, (list, tuple)):
        return {k: v for i, item in enumerate(node)
                for k, v in _numbers(item, f'{prefix}.{i}').items()}
    if isinstance(node, (int, float, np.number)) and not isinstance(
            node, bool):
        return {prefix: float(node)}
    return {}


# the JSON text of each digest computed in this process (:func:`same`
# compares it again with the files renamed since named as before)
_TEXTS: Dict[str, str] = {}


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _digest(obj) -> str:
    text = json.dumps(obj, sort_keys=True, default=str)
    digest = _hash(text)
    _TEXTS[digest] = text
    return digest


def _seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@functools.lru_cache(None)
def _image() -> str:
    """A fixed 160 x 120 RGB PNG (lossless: every reader decodes the same
    pixels) for the pipelines."""
    from PIL import Image
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:120, 0:160]
    pixels = np.stack([x * 1.5, y * 2.0, (x + y) % 97 * 2.5], -1)
    pixels = np.clip(pixels + rng.normal(0, 20, pixels.shape), 0, 255)
    path = osp.join(tempfile.mkdtemp(prefix='mmpos_fingerprint_'),
                    'probe.png')
    Image.fromarray(pixels.astype(np.uint8)).save(path)
    return path


def _pipeline_batch(cfg, seed: int) -> dict:
    """Two samples of ``cfg``'s train pipeline on :func:`_image`,
    collated by its dataloader's ``collate_fn`` (mmengine's default:
    ``pseudo_collate``)."""
    from mmengine.dataset import Compose

    from mmpos.analysis.plan import collate_fn
    pipeline = Compose(copy.deepcopy(cfg.train_dataloader.dataset.pipeline))
    items = []
    for k in range(2):
        _seed(seed * 2 + k)
        items.append(pipeline(dict(img_path=_image(), gt_label=k)))
    return collate_fn(cfg)(items)


def _optim_wrapper(cfg, model):
    """``cfg.optim_wrapper`` built for ``model``, AMP wrappers as plain
    fp32 ones (the probe runs on CPU, without autocast)."""
    from mmengine.optim import build_optim_wrapper

    from mmpos.analysis.plan import plain_optim_wrapper
    return build_optim_wrapper(model, plain_optim_wrapper(cfg)[0])


# the hooks of a config that change its model during training, run around
# the probe's steps with a runner of model, iteration and schedule length
MODEL_HOOKS = ('EMATeacherHook', 'DropPosSigmaHook')


def _model_hooks(cfg, scope) -> list:
    from mmpos_harness.tiny_models import registries
    configured = [*(cfg.get('default_hooks') or {}).values(),
                  *(cfg.get('custom_hooks') or [])]
    return [registries(scope).HOOKS.build(copy.deepcopy(h))
            for h in configured if h and h.get('type') in MODEL_HOOKS]


def config_probe(config: str) -> dict:
    """The probe of ``config`` (module docstring)."""
    from mmpos_harness.tiny_models import build_tiny, load, tiny_inputs
    cfg, scope = load(config)
    values = {'resolved': _digest(cfg.to_dict())}
    if not cfg.get('model'):
        return values
    _seed(0)
    model, model_cfg = build_tiny(cfg, scope)

    def batch(step):
        if tiny_inputs(model_cfg, scope) is None:
            return _pipeline_batch(cfg, step)
        _seed(step)
        return tiny_inputs(model_cfg, scope)

    model.train()
    if cfg.get('optim_wrapper'):
        wrapper = _optim_wrapper(cfg, model)
        hooks = _model_hooks(cfg, scope)
        runner = SimpleNamespace(model=model, iter=0, epoch=0, max_iters=(
            cfg.get('train_cfg') or {}).get('max_iters', 100))
        MessageHub.get_current_instance().update_info('max_iters',
                                                      runner.max_iters)
        for hook in hooks:
            hook.before_train(runner)
        for step in range(STEPS):
            runner.iter = step
            MessageHub.get_current_instance().update_info('iter', step)
            for hook in hooks:
                hook.before_train_iter(runner, step)
            _seed(100 + step)
            log_vars = model.train_step(batch(step), wrapper)
            for hook in hooks:
                hook.after_train_iter(runner, step)
            values.update({f'step{step}.{k}': float(v)
                           for k, v in sorted(log_vars.items())})
        values.update(_summary(model.parameters(), 'params'))
    backbone = getattr(model, 'backbone', None)
    if backbone is not None:
        model.eval()
        inputs = model.data_preprocessor(batch(STEPS), False)['inputs']
        while isinstance(inputs, (list, tuple)):  # views: the first
            inputs = inputs[0]
        with torch.no_grad():
            values.update(_summary(_tensors(backbone(inputs)), 'eval'))
    return values


def scheme_probe(name: str) -> dict:
    """The probe of the position scheme ``name`` (module docstring)."""
    from mmpos.models.backbones.rope_vit import RoPEVisionTransformer
    values = {}
    arch = dict(embed_dims=32, num_layers=2, num_heads=2,
                feedforward_channels=64)
    for variant, extra in (
            ('global', dict(num_register_tokens=1)),
            ('window', dict(window_size=2, global_attn_indexes=(1,),
                            with_cls_token=False))):
        _seed(0)
        vit = RoPEVisionTransformer(
            arch=arch, img_size=32, patch_size=8, rope=dict(type=name),
            out_type='featmap', **extra)
        x = torch.randn(2, 3, 32, 48)
        out = _tensors(vit(x))
        sum(o.square().mean() for o in out).backward()
        values.update(_summary(out, f'{variant}.out'))
        values.update(_summary([p.grad for p in vit.parameters()
                                if p.grad is not None], f'{variant}.grad'))
        vit.eval()
        with torch.no_grad():
            values.update(_summary(_tensors(vit(torch.randn(1, 3, 48, 32))),
                                   f'{variant}.eval'))
    return values


def stats_probe() -> dict:
    """The statistics package on fixed two-level samples."""
    import mmpos_stats as stats
    a = [[71.2, 70.8], [69.9, 70.4], [72.0, 71.1]]
    b = [[68.5, 69.0], [70.1, 69.2], [68.0, 68.8]]
    c = [[70.0, 70.6], [71.5, 70.9], [69.2, 69.9]]
    tests = [stats.welch(a, b), stats.welch(a, c),
             stats.paired([1.0, 2.5, 1.7, 2.2], [0.4, 1.9, 1.6, 1.1])]
    adjusted = stats.family(tests, stats.HOLM) + stats.family(
        tests, stats.BH)
    boot = stats.bootstrap_interval(a, b, draws=500)
    intervals = stats.rank_intervals({'a': [a, b], 'b': [b, c],
                                      'c': [c, a]}, draws=200)
    values = {'tests': _digest([t.asdict() for t in adjusted]),
              'bootstrap': _digest(boot), 'ranks': _digest(intervals),
              'mdd': stats.minimum_detectable_difference(0.8, 4.0),
              'runs': stats.runs_for_difference(1.2, 2.0),
              'pooled': _digest(stats.pooled_sd([[1.0, 2.0, 4.0],
                                                  [3.0, 3.5]])),
              'describe': _digest(stats.describe({'x': adjusted[:3]}))}
    return values


def evaluation_probe() -> dict:
    """The frozen evaluators on features of a fixed 2-block RoPE ViT:
    kNN and its image-free baseline, the linear depth probe and its
    metrics, keypoint matching and PCK, dense retrieval (Hummingbird)
    mIoU and token health."""
    from mmpos.evaluation import (correspondence, dense, dense_retrieval,
                                  depth_probe, health, knn)
    from mmpos.models.backbones.rope_vit import RoPEVisionTransformer
    _seed(0)
    vit = RoPEVisionTransformer(
        arch=dict(embed_dims=32, num_layers=2, num_heads=2,
                  feedforward_channels=64), img_size=32, patch_size=8,
        out_type='featmap', out_indices=(0, 1)).eval()
    images = torch.randn(12, 3, 32, 32)
    labels = torch.arange(12) % 3
    feats = dense.dense_features(vit, images, batch_size=5)
    pooled = feats['patch'][-1].mean((2, 3))
    values = {f'knn.{k}': v for k, v in knn.knn_accuracy(
        pooled[:8], labels[:8], pooled[8:], labels[8:], 3, k=3).items()}
    values.update({f'prior.{k}': v for k, v in knn.class_prior_accuracy(
        labels[:8], labels[8:], 3).items()})
    depths = torch.rand(12, 32, 32, generator=torch.Generator(
    ).manual_seed(1)) * 5 + 0.5
    train = {k: [t[:8] if t is not None else None for t in v]
             for k, v in feats.items()}
    test = {k: [t[8:] if t is not None else None for t in v]
            for k, v in feats.items()}
    head = depth_probe.fit_depth_probe(train, depths[:8], cls_token=False,
                                       iters=5, batch_size=4)
    pred = depth_probe.predict_depth(head, test, (32, 32), cls_token=False)
    values.update({f'depth.{k}': v for k, v in depth_probe.depth_metrics(
        pred, depths[8:]).items()})
    grid = feats['patch'][-1]
    kps = torch.tensor([[4.0, 4.0], [20.0, 12.0], [28.0, 30.0]])
    match = correspondence.match_keypoints(grid[0], grid[1], kps, (32, 32),
                                           (32, 32))
    values.update({f'pck.{k}': v for k, v in correspondence.pck(
        [correspondence.pck_hits(match, kps, 16.0)]).items()})
    seg = (torch.arange(32 * 32).reshape(32, 32) // 300 % 3).expand(12, -1, -1)
    values.update({f'hummingbird.{k}': v for k, v in
                   dense_retrieval.hummingbird_miou(
                       grid[:8], seg[:8], grid[8:], seg[8:], ['a', 'b', 'c'],
                       k=5).items()})
    values.update({f'health.{k}': v for k, v in health.token_health(
        grid.flatten(2).transpose(1, 2)).items()})
    return values


def dense_suite_probe() -> dict:
    """The dense-probe suite (:mod:`mmpos.evaluation.dense_suite`) at a
    tiny size: tiny mini-NYU, mini-SPair and mini-scenes, each probe of
    ``MINI_PROBES`` run (32 px, 5 depth iterations, one retrieval
    augmentation epoch) on a random-init ViT-tiny and on the raw pixels,
    its image-free baseline, and the informativeness test of the two."""
    from mmpos.apis.features import data_mean_std, load_config
    from mmpos.evaluation import dense_suite as suite
    from mmpos_harness import mini_data
    config = 'configs/demo/droppos_vit-tiny-rope-mixed_mini.py'
    fast = dict(depth=dict(size=32, iters=5), correspondence=dict(size=32),
                retrieval=dict(size=32, augment_epochs=1))
    values, runs = {}, {}
    mean, std = data_mean_std(config)
    with tempfile.TemporaryDirectory() as root:
        roots = dict(depth=osp.join(root, 'nyu'),
                     correspondence=osp.join(root, 'spair'),
                     retrieval=osp.join(root, 'scenes'))
        mini_data.make_mini_nyu(roots['depth'], num_train=4, num_val=2,
                                img_size=32)
        mini_data.make_mini_spair(roots['correspondence'], num_train=1,
                                  num_val=2, img_size=32)
        mini_data.make_mini_scenes(roots['retrieval'], num_train=4,
                                   num_val=2, img_size=32)
        for name, path in suite.MINI_PROBES.items():
            cfg = load_config(path)
            extra = dict(seed=0) if suite.PROBES[name].seeded else {}
            for init in (None, suite.RAW_PIXELS):
                backbone = suite.probed_backbone(name, cfg, config, init)
                metrics, _ = suite.PROBES[name].run(
                    cfg, backbone, mean, std, data_root=roots[name],
                    **extra, **fast[name])
                runs.setdefault(init or 'random', {}).update(
                    {f'{name}/{k}': float(v) for k, v in metrics.items()})
        free = suite.image_free_probes(data_roots=roots)
    found = suite.informative({'random': [runs['random']],
                               'pixels': [runs[suite.RAW_PIXELS]]}, free)
    values.update(_numbers(runs, 'runs'))
    values.update(_numbers(free, 'image_free'))
    values['informative'] = _digest({k: (v[0], v[1]) for k, v in
                                     found.items()})
    values['headline'] = _digest(suite.HEADLINE)
    return values


def position_study_probe() -> dict:
    """The resolution study's harness at a tiny size: its images, two
    seeds of the models without positions and with APE trained for two
    steps and evaluated (resize, canvas, shuffled), its scheme table and
    its analysed, rendered tables."""
    from mmpos_harness import position_study as study
    sizes = [16, 24]
    runs = {}
    with tempfile.TemporaryDirectory() as root:
        data = study.make_data(root, 6, 4, 16, sizes)
        for name in ('none', 'APE'):
            kwargs = study.schemes(16 // study.PATCH)[name]
            for seed in (0, 1):
                model, loss = study.train(kwargs, *data['train'], seed, 2,
                                          16, 4, 1e-3, study.LAYER_SCALE)
                runs.setdefault(name, {})[seed] = dict(
                    study.evaluate(model, kwargs, data, 16, sizes,
                                   study.LAYER_SCALE), loss=loss)
    tables = {factor: study.analyse(study.factor_table(runs, factor, 16,
                                                       sizes))
              for factor in study.FACTORS}
    tables['shuffled'] = study.analyse(study.shuffle_table(runs, 16))
    return {'schemes': _digest(study.schemes(16 // study.PATCH)),
            **_numbers(runs, 'runs'), **_numbers(tables, 'tables'),
            'markdown': _digest([study.table_markdown(t)
                                 for t in tables.values()])}


def bench_probe(name: str, mode: str) -> dict:
    """The benchmark module ``benchmarks/<name>.py`` run as ``run.py``
    runs it (``mode``: ``quick`` or ``full`` sizes), each timed step called once
    instead of timed: every module's outputs on the way (a global forward
    hook: their sums) and the rows it summarises from fixed stand-in
    times, i.e. what it computes, compares and reports, not how long it
    takes."""
    _timing, run = _benchmarks()
    outputs = []

    def record(module, args, output):
        outputs.extend(t.detach() for t in _tensors(output)
                       if t.is_floating_point())

    def once(steps, device, warmup, iters, batch_size=None, memory=True):
        stats = {}
        for k, (step_name, step) in enumerate(steps.items()):
            step()
            times = [10. * (1 + 0.1 * k) * (1 + 0.01 * r) for r in range(3)]
            stats[step_name] = dict(step_ms=times[1], times_ms=times,
                                    faults=0)
            if memory:
                stats[step_name]['peak_mib'] = 1. + k
            if batch_size:
                stats[step_name]['images_per_s'] = batch_size / times[1]
        return stats

    def peak(step, device):
        step()
        return 2**20

    saved = _timing.measure, _timing.peak_memory
    _timing.measure, _timing.peak_memory = once, peak
    hook = torch.nn.modules.module.register_module_forward_hook(record)
    sys.path.insert(0, osp.join(ROOT, 'benchmarks'))
    try:
        _seed(0)
        entry = run.run_one(name, dict(quick=mode == 'quick', iters=1,
                                       warmup=0, device='cpu', amp='off'))
    finally:
        sys.path.remove(osp.join(ROOT, 'benchmarks'))
        hook.remove()
        _timing.measure, _timing.peak_memory = saved
    values = _summary(outputs, 'outputs') if outputs else {}
    values.update(rows=_digest(entry['rows']),
                  markdown=_digest(entry.get('markdown')))
    return values


def _benchmarks():
    """``benchmarks/_timing.py`` and ``benchmarks/run.py`` as modules."""
    sys.path.insert(0, osp.join(ROOT, 'benchmarks'))
    try:
        import _timing
        import run
    finally:
        sys.path.remove(osp.join(ROOT, 'benchmarks'))
    return _timing, run


def timing_probe() -> dict:
    """The benchmarks' ratios, target tests, verdicts and summary page on
    fixed per-round times."""
    _timing, run = _benchmarks()
    rounds = np.random.default_rng(0).normal(0, 0.02, (3, 8))
    entries = {name: dict(times_ms=list(10 * scale * np.exp(noise)),
                          step_ms=10 * scale, peak_mib=5 * scale, faults=0,
                          images_per_s=8 / scale)
               for name, scale, noise in zip(('none', 'mixed', 'liere'),
                                             (1.0, 1.05, 1.4), rounds)}
    _timing.add_ratios(entries, 'none')
    rows = [_timing.comparison('layer', name, entries[name], 'none',
                               entries['none'], target=target)
            for name, target in (('mixed', '<= 1.1'), ('liere', '<= 1.5'),
                                 ('liere', '~1.4 (paper)'))]
    run.judge_targets(rows)
    provenance_ = dict(command='probe', commit='0' * 40, machine='probe',
                       date='probe')
    summary = dict(rows=rows, benchmarks={'layer': dict(seconds=1.0)},
                   settings=dict(provenance=provenance_, device='cpu',
                                 threads=1, amp='off', load_start=[0.0],
                                 load_end=[0.0], total_s=1.0,
                                 malloc='reuse'))
    return {'entries': _digest(entries), 'rows': _digest(rows),
            'format': _digest([_timing.format_ratio(r) for r in rows]),
            'summary': _digest(run.summary_markdown(summary))}


def mini_data_probe() -> dict:
    """A digest of every file of small mini datasets of each kind (their
    generators draw from seeded numpy generators)."""
    from mmpos_harness import mini_data
    values = {}
    with tempfile.TemporaryDirectory() as root:
        mini_data.make_all(root, ('coco', 'ade', 'unlabeled', 'cls'),
                           num_train=4, num_val=2, num_unlabeled=4,
                           img_size=32, seed=0)
        mini_data.make_mini_stuff(osp.join(root, 'stuff'), num_train=2,
                                  num_val=1, img_size=32)
        mini_data.make_mini_nyu(osp.join(root, 'nyu'), num_train=2,
                                num_val=1, img_size=32)
        mini_data.make_mini_spair(osp.join(root, 'spair'), num_train=1,
                                  num_val=1, img_size=32)
        for kind in sorted(os.listdir(root)):
            values[kind] = _tree_digest(osp.join(root, kind), root)
    return values


def _tree_digest(folder: str, root: str) -> str:
    """A digest of every file under ``folder``, in a fixed order: its path
    relative to ``root`` and its bytes (a ``.pth`` checkpoint by its keys
    and shapes: the rehearsal's are random initialisations)."""
    digest = hashlib.sha256()
    for here, dirs, files in sorted(os.walk(folder)):
        dirs.sort()
        for name in sorted(files):
            path = osp.join(here, name)
            digest.update(osp.relpath(path, root).encode())
            if name.endswith('.pth'):
                state = torch.load(path)['state_dict']
                digest.update(repr([(k, tuple(v.shape)) for k, v in
                                    sorted(state.items())]).encode())
                continue
            with open(path, 'rb') as f:
                digest.update(f.read())
    return digest.hexdigest()[:16]


def rehearsal_probe(config: str) -> dict:
    """What a full-size rehearsal of ``config`` (:mod:`mmpos_harness.
    rehearsal`) changes and writes: the config it runs (a digest of its
    dump, the synthetic root written as ``<root>``), the changes it lists
    and a digest of every synthetic file (a teacher checkpoint by its keys
    and shapes: its values are a random initialisation). It launches
    nothing."""
    from mmpos.guardrails.launch import load_config
    from mmpos_harness import rehearsal
    cfg = load_config(osp.join(ROOT, config))
    with tempfile.TemporaryDirectory() as root:
        changes = rehearsal.rehearsal_config(cfg, osp.join(root, 'data'), 2)
        files = _tree_digest(root, root)
        text = cfg.pretty_text.replace(root, '<root>')
    return {'config': _digest(text), 'changes': _digest(changes),
            'files': files}


# the benchmark modules with a probe (bench_probe): those whose step at full
# size costs seconds; the other modules' files are judged by text
BENCH_PROBES = ('position_schemes',)
FIXED_PROBES: Dict[str, Tuple[Callable[[], dict], str]] = {
    # name: (probe, the path whose presence in depends calls for it)
    'stats': (stats_probe, 'mmpos_stats'),
    'timing': (timing_probe, 'benchmarks/_timing.py'),
    'mini_data': (mini_data_probe, 'mmpos_harness/mini_data'),
    'evaluation': (evaluation_probe, 'mmpos/evaluation/knn.py'),
    'dense_suite': (dense_suite_probe, 'mmpos/evaluation/dense_suite.py'),
    'position_study': (position_study_probe,
                       'mmpos_harness/position_study.py'),
}


def _files(depends: Iterable[str]) -> List[str]:
    return sorted({f for p in depends for f in provenance.files_under(p)})


def probes_for(depends: Iterable[str], command: str = '') -> List[str]:
    """The probe names of a result with these ``depends`` produced by
    ``command`` (module docstring; a benchmark's probe runs at the sizes
    of the command: ``--quick`` or full)."""
    mode = 'quick' if '--quick' in command.split() else 'full'
    return list(_probes_for(tuple(sorted(set(depends))), mode))


def record_probes(record: dict) -> List[str]:
    """The probes a stored provenance record's fingerprint holds: those of
    its ``depends`` (their files renamed since under their new paths:
    :func:`~mmpos_harness.provenance.renamed_depends`) and command
    (:func:`probes_for`) as they were at its commit: without the position
    schemes added since (a result that reads
    the registry's list built the schemes it held then), and without every
    scheme where no file of its ``depends`` read that list then."""
    return list(_record_probes(record['commit'],
                               tuple(sorted(set(record['depends']))),
                               record['command']))


@functools.lru_cache(None)
def _record_probes(commit: str, depends: Tuple[str, ...],
                   command: str) -> Tuple[str, ...]:
    # the code it ran where it lives now (a file renamed since calls for
    # the same probes under its new path)
    depends = tuple(provenance.renamed_depends(depends, commit))
    names = probes_for(depends, command)
    readers = provenance.registry_readers(depends)
    if readers and not provenance.registry_readers(readers, commit):
        built = provenance._completed(depends, registry_reads=False)[1]
        names = [n for n in names
                 if not n.startswith('scheme:') or n[len('scheme:'):] in built]
    later = {f'scheme:{name}' for name in provenance.scheme_files()
             if not _scheme_added_before(name, commit)}
    return tuple(n for n in names if n not in later)


@functools.lru_cache(None)
def _scheme_added_before(name: str, commit: str) -> bool:
    """Whether the class of position scheme ``name`` existed at ``commit``:
    the first commit whose diff adds ``class <its class>(``, in whatever
    file it was (a scheme added to an existing module, or moved since), is
    ``commit`` or an ancestor of it."""
    from mmpos.registry import POSITION_ENCODINGS
    cls = POSITION_ENCODINGS.module_dict[name]
    added = provenance._git('log', f'-Sclass {cls.__name__}(',
                            '--format=%H', '--reverse').split()
    if not added:
        return False
    try:
        provenance._git('merge-base', '--is-ancestor', added[0], commit)
    except subprocess.CalledProcessError:
        return False
    return True


@functools.lru_cache(None)
def _probes_for(depends: Tuple[str, ...], mode: str) -> Tuple[str, ...]:
    files = _files(depends)
    names = [f'bench:{b}:{mode}' for b in BENCH_PROBES
             if f'benchmarks/{b}.py' in files]
    names += [f'config:{f}' for f in files if f.startswith('configs/')
              and f.endswith('.py') and '_base_' not in f.split('/')]
    names += [f'scheme:{s}' for s in sorted(provenance.built_schemes(
        depends)) if s in provenance.scheme_files()]
    names += [name for name, (_, path) in FIXED_PROBES.items()
              if any(f == path or f.startswith(path + '/') for f in files)]
    if 'mmpos_harness/rehearsal.py' in files:
        names += [n.replace('config:', 'rehearsal:', 1) for n in names
                  if n.startswith('config:')]
    return tuple(names)


def _run_traced(probe: Callable[[], dict]) -> Tuple[dict, List[str]]:
    """``probe()`` in one thread, and the repository files whose functions
    it called (not module or class bodies; :data:`IMPORTS` are imported
    before, so that no registration at import counts)."""
    called = set()

    def tracer(frame, event, arg):
        if frame.f_code.co_flags & inspect.CO_OPTIMIZED:  # functions only
            called.add(frame.f_code.co_filename)

    threads = torch.get_num_threads()
    # the optimizer's paramwise lines and the evaluators' tables: mmpos'
    # logger, which they make the current one
    logger = MMLogger.get_instance('mmpos')
    level = logger.level
    torch.set_num_threads(1)
    logger.setLevel('ERROR')
    sys.settrace(tracer)
    try:
        values = probe()
    finally:
        sys.settrace(None)
        torch.set_num_threads(threads)
        logger.setLevel(level)
    files = sorted(osp.relpath(f, ROOT) for f in called
                   if f.startswith(ROOT + os.sep)
                   and not osp.relpath(f, ROOT).startswith(('.venv', 'tests')))
    return values, files


# imported before a probe is traced
IMPORTS = ('mmpos.models', 'mmpos.engine', 'mmpos.datasets', 'mmpos.evaluation',
           'mmpos.evaluation.correspondence', 'mmpos.evaluation.dense',
           'mmpos.evaluation.dense_retrieval', 'mmpos.evaluation.depth_probe',
           'mmpos.evaluation.health', 'mmpos.evaluation.knn',
           'mmpos_stats', 'mmpos_harness.mini_data',
           'mmpos_harness.tiny_models', 'mmdet.models', 'mmseg.models',
           'mmpretrain.models')


@functools.lru_cache(None)
def run_probe(name: str) -> Tuple[Tuple[Tuple[str, object], ...],
                                  Tuple[str, ...]]:
    """``(values, files)`` of the probe ``name`` on the code now, once per
    process: its outputs as sorted ``(key, value)`` pairs and the files it
    called."""
    kind, _, arg = name.partition(':')
    probe = {'config': lambda: config_probe(arg),
             'scheme': lambda: scheme_probe(arg),
             'bench': lambda: bench_probe(*arg.split(':')),
             'rehearsal': lambda: rehearsal_probe(arg)}.get(kind)
    if probe is None:
        if name not in FIXED_PROBES:
            raise KeyError(f'fingerprint: no probe named {name!r}')
        probe = FIXED_PROBES[name][0]
    with _LOCK:
        for module in IMPORTS:
            importlib.import_module(module)
        _benchmarks()
        values, files = _run_traced(probe)
    values = {k: v if isinstance(v, str) else float(v)
              for k, v in values.items()}
    for key, value in values.items():
        if not isinstance(value, str) and not math.isfinite(value):
            raise ValueError(f'fingerprint: probe {name} gives {key} = '
                             f'{value}')
    return tuple(sorted(values.items())), tuple(files)


def compute(depends: Iterable[str], command: str = '',
            names: Iterable[str] = None) -> dict:
    """The fingerprint of a result with these ``depends`` produced by
    ``command`` (or of the probes ``names``): ``{probe: {values,
    files}}``."""
    found = {}
    for name in probes_for(depends, command) if names is None else names:
        values, files = run_probe(name)
        found[name] = dict(values=dict(values), files=list(files))
    return found


def write(depends: Iterable[str], command: str = '',
          root: str = ROOT, names: Iterable[str] = None) -> str:
    """Compute the fingerprint of ``depends`` and ``command``, or of the
    probes ``names`` (:func:`compute`), store it under :data:`STORE` of
    ``root`` (or the folder ``$MMPOS_FINGERPRINT_STORE`` names: the tests'
    records stay out of the repository) and return its id."""
    probes = compute(depends, command, names)
    fid = _digest(probes)
    store = os.environ.get('MMPOS_FINGERPRINT_STORE') or osp.join(root, STORE)
    path = osp.join(store, f'{fid}.json')
    if not osp.isfile(path):
        os.makedirs(osp.dirname(path), exist_ok=True)
        data = dict(commit=provenance.head(root), date=provenance.now(),
                    machine=provenance.machine(), probes=probes)
        with open(path + '.tmp', 'w') as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.write('\n')
        os.replace(path + '.tmp', path)
    return fid


def load(fid: str, root: str = ROOT) -> dict:
    """The stored fingerprint ``fid``."""
    path = osp.join(root, STORE, f'{fid}.json')
    if not osp.isfile(path):
        raise FileNotFoundError(f'fingerprint {fid}: no file {path}')
    with open(path) as f:
        return json.load(f)


def same(stored, now, renames: Dict[str, str] = None,
         scale: float = 0.) -> bool:
    """Whether a probe value is what was stored: digests equal, numbers
    within :data:`RTOL` of the larger of them and of ``scale`` (at least
    :data:`ATOL`). With ``renames`` (``{old path: new path}`` of the files
    moved since the fingerprint's commit), a digest is also the stored one
    when its text, with those files' new paths and module names written as
    the old ones (:func:`~mmpos_harness.provenance.undo_renames`), is the
    stored text: e.g. a table that cites the file whose functions computed
    it."""
    if isinstance(stored, str) or isinstance(now, str):
        return stored == now or (bool(renames) and now in _TEXTS and _hash(
            provenance.undo_renames(_TEXTS[now], renames)) == stored)
    return math.isclose(stored, now, rel_tol=RTOL,
                        abs_tol=max(ATOL, RTOL * scale))


def value_scale(values: dict, key: str) -> float:
    """The magnitude a :func:`_summary` sum is rounded at: for ``<p>.sum``
    and ``<p>.cos``, the square root of ``<p>.sq`` (the entries' L2 norm),
    else 0. Such a sum of entries of both signs (a LayerNorm's outputs)
    lies near 0, where another CPU's summation order moves it by many
    times its own size (1e-6 -> 9e-6 on a 1,536 sum of squares) while the
    norm moves by 1e-8 of itself: its tolerance is relative to the norm."""
    prefix, _, kind = key.rpartition('.')
    sq = values.get(f'{prefix}.sq') if kind in ('sum', 'cos') else None
    return math.sqrt(abs(sq)) if isinstance(sq, (int, float)) else 0.


def changed_probes(fingerprint: dict) -> List[str]:
    """The probes of a stored fingerprint whose outputs differ now (a
    config that no longer exists: its probe, changed), a file's path in
    them read as it was at the fingerprint's commit (:func:`same`)."""
    try:
        renames = dict(provenance.renames_since(fingerprint['commit']))
    except subprocess.CalledProcessError:  # not in this clone
        renames = {}
    changed = []
    for name, stored in sorted(fingerprint['probes'].items()):
        if name.startswith(('config:', 'rehearsal:')) and not osp.isfile(
                osp.join(ROOT, name.partition(':')[2])):
            changed.append(f'{name} (gone)')
            continue
        values = dict(run_probe(name)[0])
        diff = [k for k in sorted(set(stored['values']) | set(values))
                if k not in values or k not in stored['values']
                or not same(stored['values'][k], values[k], renames,
                            value_scale(stored['values'], k))]
        if diff:
            changed.append(f'{name} ({", ".join(diff[:3])}'
                           f'{", ..." if len(diff) > 3 else ""})')
    return changed


def text_judged(record: dict, fingerprint: dict) -> List[str]:
    """The files of the record's ``depends`` that none of its probes
    reaches (judged by their text). Reached, and so judged by the probes'
    outputs instead:

    * a file whose functions a probe calls;
    * a library package's ``__init__.py`` (``import mmpos`` runs every one
      of them in every probe);
    * a model file (:data:`MODEL_FILES`) that no probe calls: the probes
      build and run every model the result built (its configs', its
      position schemes', its benchmark's), so it was not on its path;
    * config files (``configs/**.py``) of a record with config probes,
      through those probes' resolved configs: a ``_base_`` file that a
      refactor empties, moves or deletes while every probed config
      resolves to the same dict changed nothing the result ran;
    * for a benchmark (``bench:`` probes and no config probes), every
      library file (:data:`LIBRARY`): its probe runs the benchmark's timed
      steps as ``run.py`` does;
    * for a result without config probes whose own files do not import
      ``mmpos.engine``, the training loop's files (:data:`ENGINE`): only a
      Runner built from a config calls a hook or an optimizer constructor
      (``import mmpos`` registers them, which runs no hook);
    * a hook module none of whose hooks the result's configs list
      (``default_hooks``, ``custom_hooks``) and that no code outside the
      engine and the tests imports (:func:`_imported_hook_files`): no
      Runner of the result built it.

    Files added after the record's commit are left out: they did not exist
    when it ran (a file that imports them changed, and is judged). A file
    moved since the record's commit is reached where a probe reached it
    under its new path (a fingerprint computed after the move).
    """
    moved = provenance.renames_since(record['commit'])
    covered = {f for probe in fingerprint['probes'].values()
               for f in probe['files']}
    covered |= {old for old, new in moved.items() if new in covered}
    names = list(fingerprint['probes'])
    configs = any(n.startswith('config:') for n in names)
    bench = any(n.startswith('bench:') for n in names) and not configs
    # the files of depends at the record's commit (one deleted since
    # changed too)
    files = provenance._git('ls-tree', '-r', '--name-only', record['commit'],
                            '--', *record['depends']).splitlines()
    runner = configs or _imports_engine(files)
    listed = frozenset().union(*(
        _config_hooks(n[len('config:'):]) for n in names
        if n.startswith('config:')))

    def unlisted_hook(path: str) -> bool:
        return path.startswith(HOOKS) and path.endswith('.py') and \
            osp.isfile(osp.join(ROOT, path)) and \
            path not in _imported_hook_files() and \
            not _hook_types(path) & listed

    def reached(path: str) -> bool:
        library = path.startswith(LIBRARY)
        return (path in covered or path.startswith(MODEL_FILES)
                or (library and osp.basename(path) == '__init__.py')
                or (bench and library)
                or (not runner and path.startswith(ENGINE))
                or unlisted_hook(path)
                or (configs and path.startswith('configs/')
                    and path.endswith('.py')))

    return sorted(f for f in files if not reached(f))


#: the library's packages
LIBRARY = ('mmpos/', 'mmpos_positions/')
#: the files that define models and position schemes
MODEL_FILES = ('mmpos/models/', 'mmpos_positions/')
#: the training loop's parts (hooks, optimizer constructors, FSDP): built
#: from a config by mmengine's Runner, so they run only for a result that
#: ran a config, or whose own files import them
ENGINE = 'mmpos/engine/'
HOOKS = ENGINE + 'hooks/'


def _engine_imports(path: str) -> List[str]:
    """The ``mmpos.engine`` names the Python file ``path`` imports
    (:func:`mmpos_harness.provenance.imported_modules`)."""
    return [m for _, m in provenance.imported_modules(path)
            if m == 'mmpos.engine' or m.startswith('mmpos.engine.')]


@functools.lru_cache(maxsize=None)
def _imported_hook_files() -> frozenset:
    """The hook modules (paths) whose names code outside mmpos/engine and
    the tests imports (``mmpos.guardrails`` the preemption and checkpoint
    hooks, a benchmark the online probe): they may run without a config
    listing them."""
    found = set()
    for path in provenance._git('ls-files', '*.py').splitlines():
        if path.startswith((ENGINE, 'tests/')):
            continue
        for name in _engine_imports(path):
            if not name.startswith(HOOKS.replace('/', '.')):
                continue
            files = provenance._module_files(name)
            if not files:  # a name the package defines or re-exports
                package, _, attr = name.rpartition('.')
                obj = getattr(importlib.import_module(package), attr)
                files = provenance._module_files(getattr(
                    obj, '__module__', None) or next(
                        m for m in sys.modules if m.startswith(package)
                        and getattr(sys.modules[m], attr, None) is obj))
            found |= files
    return frozenset(found)


@functools.lru_cache(maxsize=None)
def _hook_types(path: str) -> frozenset:
    """The names of the hook classes the module ``path`` defines."""
    from mmengine.hooks import Hook
    module = importlib.import_module(path[:-len('.py')].replace('/', '.'))
    return frozenset(name for name, obj in vars(module).items()
                     if isinstance(obj, type) and issubclass(obj, Hook)
                     and obj.__module__ == module.__name__)


@functools.lru_cache(maxsize=None)
def _config_hooks(config: str) -> frozenset:
    """The hook types (without a scope) a config's runner builds: its
    ``default_hooks`` and ``custom_hooks`` as it resolves now (a config
    whose hooks changed since fails its own probe)."""
    from mmengine.config import Config
    cfg = Config.fromfile(osp.join(ROOT, config))
    listed = list((cfg.get('default_hooks') or {}).values()) + list(
        cfg.get('custom_hooks') or [])
    return frozenset(str(h['type']).split('.')[-1] for h in listed
                     if isinstance(h, dict) and 'type' in h)


def _imports_engine(paths: Iterable[str]) -> bool:
    """Whether one of the files ``paths`` (outside :data:`ENGINE`, as they
    are now) imports ``mmpos.engine``."""
    return any(_engine_imports(p) for p in paths
               if not p.startswith(ENGINE) and p.endswith('.py')
               and osp.isfile(osp.join(ROOT, p)))


def numeric_machine(machine: str) -> str:
    """What a probe's numbers depend on in a :func:`~mmpos_harness.
    provenance.machine` string: the CPU model and the torch version, not
    the number of CPUs (the probes run single-threaded)."""
    parts = [p.strip() for p in machine.split(',')]
    return ', '.join(p for p in parts if not p.endswith(' CPUs'))


def status(record: dict) -> dict:
    """``{state, reasons}`` of a provenance record (module docstring):
    ``state`` is ``current``, ``stale`` or ``unknown``.

    A fingerprint computed on another CPU model or torch
    (:func:`numeric_machine`) is not compared: another CPU's kernels round
    differently, and a few training steps, a threshold metric (a detector's
    sampled proposals, depth's delta_1) or a table's rounded digits carry
    that far past :data:`RTOL`. Its record is judged by its text-judged
    files alone: ``stale`` when they changed, else ``unknown``; either
    with ``elsewhere`` set (the machine that can judge it is named)."""
    if record.get('dirty'):
        return dict(state='stale', reasons=[
            f'measured with uncommitted changes to {record["dirty"]}'])
    if 'fingerprint' not in record:
        return dict(state='unknown', reasons=['no fingerprint'])
    fingerprint = load(record['fingerprint'])
    theirs = numeric_machine(fingerprint.get('machine', ''))
    elsewhere = theirs != numeric_machine(provenance.machine())
    reasons = [] if elsewhere else [
        f'probe {p}' for p in changed_probes(fingerprint)]
    try:
        text = text_judged(record, fingerprint)
        changed = provenance.changed_since(dict(record, depends=text)) \
            if text else []
    except (LookupError, subprocess.CalledProcessError) as err:
        return dict(state='unknown', reasons=[str(err)])
    reasons += [f'commit {c if len(c) <= 80 else c[:77] + "..."}'
                for c in changed]
    if elsewhere:
        return dict(state='stale' if reasons else 'unknown', elsewhere=True,
                    reasons=reasons or [f'fingerprinted on {theirs}: its '
                                        'probes are compared there'])
    return dict(state='stale' if reasons else 'current', reasons=reasons)


def result_files(root: str = ROOT) -> List[str]:
    """The stored result files (:data:`RESULT_GLOBS`; not the fingerprints
    and the status file), absolute, sorted."""
    import glob
    own = (osp.join(root, STORE) + os.sep, osp.join(root, STATUS))
    return sorted({p for pattern in RESULT_GLOBS for p in glob.glob(
        osp.join(root, pattern), recursive=True)
        if not p.startswith(own[0]) and p != own[1]})


def stored_records(root: str = ROOT) -> List[Tuple[str, dict]]:
    """``(result file, record)`` of every provenance record (a dict with
    ``commit`` and ``depends``) stored under :data:`RESULT_GLOBS`, paths
    relative to ``root``, in file order."""
    found = []
    for path in result_files(root):
        with open(path) as f:
            found += [(osp.relpath(path, root), r)
                      for r in _walk_records(json.load(f))]
    return found


def _walk_records(node):
    """The provenance records in parsed JSON, outermost first."""
    if isinstance(node, dict):
        if 'commit' in node and 'depends' in node:
            yield node
        else:
            for value in node.values():
                yield from _walk_records(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk_records(value)


def result_of(path: str) -> str:
    """The result a stored file belongs to: its folder directly under
    ``results/``, else the file itself."""
    parts = path.split('/')
    if parts[0] == 'results' and len(parts) > 2:
        return '/'.join(parts[:2])
    return path


def results_status(root: str = ROOT) -> Dict[str, dict]:
    """``{result: {state, commit, reasons}}`` of every stored result
    (:func:`result_of`): ``stale`` when one of its records is, else
    ``unknown`` when one is, else ``current``; ``commit`` the oldest
    commit its records were measured at; ``elsewhere`` when one of its
    records was fingerprinted on another machine (:func:`status`)."""
    cache, found = {}, {}
    for path, record in stored_records(root):
        key = (record.get('fingerprint'), record['commit'],
               tuple(record['depends']), tuple(record.get('dirty', ())))
        if key not in cache:
            cache[key] = status(record)
        state = cache[key]
        entry = found.setdefault(result_of(path), dict(
            state='current', commit=record['commit'], reasons=[]))
        entry['reasons'] += [r for r in state['reasons']
                             if r not in entry['reasons']]
        if state.get('elsewhere'):
            entry['elsewhere'] = True
        order = ('current', 'unknown', 'stale')
        if order.index(state['state']) > order.index(entry['state']):
            entry['state'] = state['state']
        if record['commit'] != entry['commit'] and _older(
                record['commit'], entry['commit'], root):
            entry['commit'] = record['commit']
    return found


def _older(a: str, b: str, root: str) -> bool:
    """Whether commit ``a`` is an ancestor of ``b``."""
    return subprocess.run(['git', '-C', root, 'merge-base', '--is-ancestor',
                           a, b], capture_output=True).returncode == 0


def stale_marks(status: Dict[str, dict],
                previous: Dict[str, dict] = None) -> Dict[str, dict]:
    """The content of :data:`STATUS` for a :func:`results_status`:
    ``{result: {commit, reasons}}`` of the stale results, which the pages
    mark. A result fingerprinted on another machine (``elsewhere``) keeps
    its mark in ``previous`` (the stored marks), or gets one only when its
    text makes it stale: a machine never drops a mark, or adds one, on
    probes it cannot compare."""
    previous = previous or {}
    marks = {result: dict(commit=entry['commit'], reasons=entry['reasons'])
             for result, entry in status.items()
             if entry['state'] == 'stale'}
    marks.update((result, previous[result]) for result, entry in
                 status.items()
                 if entry.get('elsewhere') and result in previous)
    return dict(sorted(marks.items()))


def read_marks(root: str = ROOT) -> Dict[str, dict]:
    """The stale results as :data:`STATUS` stores them (none without the
    file)."""
    path = osp.join(root, STATUS)
    if not osp.isfile(path):
        return {}
    with open(path) as f:
        return json.load(f)


def mark(result: str, marks: Dict[str, dict]) -> str:
    """The line a page shows above a stale result's numbers ('' when
    ``result`` is not in ``marks``)."""
    if result not in marks:
        return ''
    return (f'> **Stale:** measured at {marks[result]["commit"][:10]}; the '
            'code it measured has changed since '
            '(`python tools/misc/results_status.py`).\n\n')


def _dump_like(text: str, data) -> str:
    """``data`` as JSON in the layout of ``text`` (indent, ASCII escapes,
    final newline), which it was read from."""
    loaded = json.loads(text)
    for indent in (2, 1, 4, None):
        for ascii_ in (False, True):
            for end in ('', '\n'):
                if json.dumps(loaded, indent=indent,
                              ensure_ascii=ascii_) + end == text:
                    return json.dumps(data, indent=indent,
                                      ensure_ascii=ascii_) + end
    raise ValueError('fingerprint: a result file in a layout json.dumps '
                     'does not write')


def _current(record: dict, root: str) -> bool:
    """Whether the code ``record`` measured computes what it computes now:
    its stored fingerprint says so (:func:`status`), or, where that cannot
    (none stored, or a probe whose own definition changed), no commit
    since its own changed its ``depends``."""
    if 'fingerprint' in record and osp.isfile(osp.join(
            root, STORE, f'{record["fingerprint"]}.json')) and \
            status(record)['state'] == 'current':
        return True
    return not provenance.changed_since(record, root)


def refingerprint(root: str = ROOT) -> List[str]:
    """Give every stored record whose code computes what it computes now
    (:func:`_current`; none dirty) a fingerprint computed now, with the
    probes :func:`record_probes` gives it (its ``depends`` where they live
    now, no scheme added since its commit): run it after a probe is added or
    changed, in a commit that changes nothing else (a record current by
    neither rule keeps its fingerprint). Fingerprints no record names any
    more are removed. Returns the files rewritten."""
    rewritten = []
    for path in sorted({p for p, _ in stored_records(root)}):
        full = osp.join(root, path)
        with open(full) as f:
            text = f.read()
        data, changed = json.loads(text), False
        for record in _walk_records(data):
            if record.get('dirty') or not _current(record, root):
                continue
            fid = write(record['depends'], record['command'], root,
                        names=record_probes(record))
            changed |= record.get('fingerprint') != fid
            record['fingerprint'] = fid
        if changed:
            with open(full, 'w') as f:
                f.write(_dump_like(text, data))
            rewritten.append(path)
    named = {r.get('fingerprint') for _, r in stored_records(root)}
    for name in os.listdir(osp.join(root, STORE)):
        if name.endswith('.json') and name[:-len('.json')] not in named:
            os.remove(osp.join(root, STORE, name))
    return rewritten
