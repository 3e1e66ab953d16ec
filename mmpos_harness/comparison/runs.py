"""Runs shared by the demo (``tools/demo.py``) and the CPU method ranking
(``tools/paper_tables/method_ranking.py``): the mini data, pretraining on the
unlabeled views, and the seed-repeated label-scarce transfer to
mini-objects (Mask R-CNN) and mini-stuff (Semantic FPN), laid out as
:mod:`mmpos_harness.comparison.seeds` reads it.

Every run is a ``tools/train.py`` subprocess; a finished run leaves
``compute.json`` and then :data:`~mmpos_harness.results.DONE_MARKER` in its
work dir (both written atomically) and is skipped when asked again, while
a run killed at any point before its marker is rerun from scratch (so both
tools resume). Only a run's ``console.log`` is written as it goes: it is
followed live, and removed with its unfinished run. Both tools hold their
result folder's lock (:func:`mmpos.guardrails.launch.work_dir_lock`) while they
run.
"""
import contextlib
import os
import os.path as osp
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from mmengine.config import Config

from mmpos.checkpoint import write_atomically
from mmpos.evaluation.dense_suite import MINI_PROBES

from ..mini_data import EVAL_NUM_VAL, changed_arguments, requested
from ..results import DONE_MARKER, last_checkpoint, read_run
from .seeds import COMPUTE, PLAN, pretrain_dir, transfer_dir, write_json

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
# Mini data of the demo: label-scarce splits (256 labelled images per task,
# 8x fewer than the unlabeled views), thousands of unlabeled views.
DATA = dict(num_train=256, num_val=32, num_unlabeled=2048, img_size=64)
# task -> (config, dataset folder, {metric key: label}, scale to percent)
TASKS = {
    'detection': dict(
        config='configs/demo/mask-rcnn_vit-tiny-rope-mixed_mini-objects.py',
        data='objects', label='mini-objects',
        metrics={'coco/bbox_mAP': 'AP^bb', 'coco/segm_mAP': 'AP^mk',
                 'coco/bbox_mAP_50': 'AP^bb_50'},
        scale=100.0),
    'segmentation': dict(
        config='configs/demo/fpn_vit-tiny-rope-mixed_mini-stuff.py',
        data='stuff', label='mini-stuff',
        metrics={'mIoU': 'mIoU', 'aAcc': 'aAcc'}, scale=1.0),
}
RANDOM_INIT = 'random init'
# Config.fromfile is not thread-safe (pkg_resources while resolving
# `mmdet::` bases): the runs of a parallel comparison read configs in turn.
_CONFIG_LOCK = threading.Lock()
# Frozen probes of the method ranking (its primary metrics): task -> tool,
# backbone config, data folder, {metric key: label} (the first one ranks;
# all higher-is-better), scale to percent, whether a seed changes the
# result. Each tool writes ``<work dir>/metrics.json``. The linear probe
# trains a BN + 1x1 conv head per 8x8-pixel cell (one token of the patch-8
# ViT) on frozen features with each transfer seed; kNN (DINO's weighted kNN
# on mean-pooled patch tokens), correspondence and retrieval draw nothing,
# so they run once per pretraining seed; the dense probes (depth,
# correspondence, retrieval: mmpos.evaluation.dense_suite) take their probe
# config (``probe``) and data root. Depth (issue 55's redesign) reads
# mini-NYU layers (mmpos_harness.mini_data.depth.make_mini_layers: the
# texture's scale is the depth, a pixel's position and the image's colour
# are not) and ranks by δ1 up to each image's scale
# (mmpos.evaluation.depth_probe.scale_aligned_d1): on the rooms of
# mini-NYU and by plain δ1 no backbone was above raw pixels.
PROBE_CONFIG = ('configs/method_ranking/'
                'linear-probe_vit-tiny-rope-mixed_mini-stuff.py')
# Methods that pretrain with an APE (DINOv2, ICPF: ``ape=True`` below) are
# evaluated with it: the probes build this backbone (PROBE_CONFIG's with
# the APE at the pretraining grid), the extraction checks against it, and
# the fine-tuning configs get its two APE settings (:func:`ape_options`).
# A study whose backbones have another width names its own probe config
# (``probe_config`` of :func:`pretrain`, :func:`probe`, :func:`compare`).
APE_PROBE_CONFIG = ('configs/method_ranking/'
                    'linear-probe_vit-tiny-rope-mixed-ape_mini-stuff.py')
# the dataset config of kNN's labelled sets (train: memory bank, val:
# queries), read from <data root>/<PROBES['knn']['data']>
KNN_DATA = 'configs/rope_vit/vit-mini_rope-mixed_mini-cls.py'
# The kNN probe's own mini-cls (issue 55): a memory bank of the tasks'
# 256 labelled images and 1,200 queries (binomial SE at most 1.4 points,
# one query 0.08 point), at the tasks' 64 px and balanced over the 3
# classes (the image-free row, the bank's majority class, is 33.3 %). The
# pretraining configs' online probe keeps its own smaller ``cls`` set.
KNN_SIZES = dict(num_train=DATA['num_train'], num_val=1200,
                 img_size=DATA['img_size'])
PROBES = {
    'linear-probe': dict(
        tool='tools/analysis_tools/linear_seg_probe.py', config=PROBE_CONFIG,
        data='stuff', label='mini-stuff linear probe',
        metrics={'mIoU': 'mIoU'}, scale=1.0, seeded=True),
    'knn': dict(
        tool='tools/analysis_tools/knn_eval.py', config=PROBE_CONFIG,
        data=osp.join('knn', 'cls'), label='mini-cls kNN',
        metrics={'knn/avg_top1': 'top-1'}, scale=1.0, seeded=False),
    'depth': dict(
        tool='tools/analysis_tools/depth_probe.py', config=PROBE_CONFIG,
        probe=MINI_PROBES['depth'], data='layers',
        label='mini-NYU layers depth',
        metrics={'depth/si_d1': 'δ1 up to scale', 'depth/d1': 'δ1'},
        scale=100.0, seeded=True),
    'correspondence': dict(
        tool='tools/analysis_tools/keypoint_correspondence.py',
        config=PROBE_CONFIG, probe=MINI_PROBES['correspondence'],
        data='spair', label='mini-SPair correspondence',
        metrics={'correspondence/pck@0.1': 'PCK@0.1'}, scale=1.0,
        seeded=False),
    'retrieval': dict(
        tool='tools/analysis_tools/dense_retrieval.py', config=PROBE_CONFIG,
        probe=MINI_PROBES['retrieval'], data='scenes',
        label='mini-scenes retrieval', metrics={'retrieval/mIoU': 'mIoU'},
        scale=1.0, seeded=True),
}


def run(cmd, log=None, threads=None):
    """Run ``cmd`` in the repository; stop with one line if it fails.

    Args:
        cmd (list[str]): The command.
        log (str, optional): File that takes its output instead of the
            console (runs in parallel).
        threads (int, optional): Its ``OMP_NUM_THREADS``.

    Returns:
        float: The CPU seconds (user + system) it used, i.e. about the
        seconds it takes on one idle core when run single-threaded.
    """
    print('+', ' '.join(cmd), flush=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads)) if threads else None
    with open(log, 'w') if log else contextlib.nullcontext() as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT if log else None)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        where = f'in {log}' if log else 'above'
        raise SystemExit(f'stopped, this step failed (its error is {where}): '
                         f'{" ".join(cmd[1:3])}')
    return usage.ru_utime + usage.ru_stime


def _make_data(root, which, num_train=64, num_val=None, num_unlabeled=256,
               img_size=128, seed=0):
    """``tools/misc/make_mini_data.py root --which ... --force`` with these
    arguments for the datasets of ``which`` not already written with them
    (then nothing runs): one written with others is rewritten, one with
    more images than asked is refused with one line (the generator never
    shrinks data)."""
    todo = [name for name in which if changed_arguments(
        osp.join(root, name), requested(name, num_train, num_val,
                                        num_unlabeled, img_size, seed)) != {}]
    if todo:
        run([sys.executable, 'tools/misc/make_mini_data.py', root, '--force',
             '--which', *todo, '--num-train', str(num_train),
             '--num-unlabeled', str(num_unlabeled), '--img-size',
             str(img_size), '--seed', str(seed)] +
            ([] if num_val is None else ['--num-val', str(num_val)]))


def ensure_data(data_root):
    """Write the mini datasets the comparison needs with its sizes
    (:data:`DATA`); those already written with them are kept."""
    _make_data(data_root, sorted({t['data'] for t in TASKS.values()}),
               num_train=DATA['num_train'], num_val=DATA['num_val'],
               img_size=DATA['img_size'])
    _make_data(data_root, ['unlabeled'], num_unlabeled=DATA['num_unlabeled'],
               img_size=DATA['img_size'])
    # the labelled set of the pretraining configs' online kNN probe, with
    # the generator's default sizes (as the guides write it); one already
    # there is used as it is (the kNN probe has its own, ensure_probe_data)
    if not osp.isdir(osp.join(data_root, 'cls')):
        _make_data(data_root, ['cls'])


def ensure_probe_data(root, tasks, seed=None):
    """Write the data folders of the probes among ``tasks`` missing under
    ``root`` (``seed``: other images than the reported ones, e.g. the method
    ranking's tuning data); returns ``root``. A folder already there is
    used as it is, except the kNN probe's ``knn/cls``, which is written
    with :data:`KNN_SIZES` whenever it holds others (never shrunk)."""
    sizes = dict(num_train=DATA['num_train'], img_size=DATA['img_size'],
                 seed=seed or 0)
    if 'knn' in tasks:
        _make_data(osp.dirname(osp.join(root, PROBES['knn']['data'])),
                   ['cls'], **dict(sizes, **KNN_SIZES))
    wanted = {PROBES[t]['data'] for t in tasks if t in PROBES and
              t != 'knn' and
              not osp.isdir(osp.join(root, PROBES[t]['data']))}
    # the evaluation sets keep their own validation sizes (EVAL_NUM_VAL)
    _make_data(root, sorted(wanted - set(EVAL_NUM_VAL)),
               num_val=DATA['num_val'], **sizes)
    _make_data(root, sorted(wanted & set(EVAL_NUM_VAL)), **sizes)
    return root


def _finish(work_dir, start, cpu_seconds):
    """Mark ``work_dir`` done, with its wall minutes since ``start`` and the
    CPU minutes of its commands in ``compute.json``: the marker comes last
    and, like every file here, is written atomically, so a run killed
    before it is rerun whole (:func:`_fresh`) and one that has it is
    complete."""
    write_json(osp.join(work_dir, COMPUTE),
               dict(minutes=round((time.time() - start) / 60, 2),
                    cpu_minutes=round((cpu_seconds or 0) / 60, 2)))
    write_atomically(b'', osp.join(work_dir, DONE_MARKER))


def _console(work_dir, threads):
    """``<work_dir>/console.log`` (created) for a run in parallel (with
    ``threads``), else None (the console)."""
    if not threads:
        return None
    os.makedirs(work_dir, exist_ok=True)
    return osp.join(work_dir, 'console.log')


def _fresh(work_dir):
    """Whether ``work_dir`` must be (re)run; an unfinished one is removed
    (a resumed comparison restarts its interrupted run)."""
    if osp.isfile(osp.join(work_dir, DONE_MARKER)):
        print(f'done already: {work_dir}')
        return False
    if osp.isdir(work_dir):
        shutil.rmtree(work_dir)
    return True


def schedule_options(config, iters):
    """``--cfg-options`` that run ``config`` for ``iters`` iterations with
    its schedule stretched to them: ``train_cfg.max_iters``, the ``end`` of
    every parameter scheduler that ends at the config's ``max_iters`` (lr,
    weight decay; warm-ups keep their length) and the checkpoint interval
    when it equals ``max_iters``. Schedules kept inside a model or a hook
    (DINOv2's teacher momentum and temperature) read the runner's
    ``max_iters`` themselves."""
    with _CONFIG_LOCK:
        cfg = Config.fromfile(config)
    length = cfg.train_cfg.max_iters
    options = [f'train_cfg.max_iters={iters}']
    for i, scheduler in enumerate(cfg.get('param_scheduler') or []):
        if scheduler.get('end') == length:
            options.append(f'param_scheduler.{i}.end={iters}')
    if cfg.default_hooks.get('checkpoint', {}).get('interval') == length:
        options.append(f'default_hooks.checkpoint.interval={iters}')
    return options


def ape_probe_config(probe_config=None):
    """The probe backbone config of an init that keeps its APE:
    ``probe_config`` where a study names one (a backbone of another width),
    else :data:`APE_PROBE_CONFIG`."""
    return probe_config or APE_PROBE_CONFIG


def ape_options():
    """``--cfg-options`` that give a fine-tuning config the APE of
    :data:`APE_PROBE_CONFIG`'s backbone (its ``use_ape`` and ``img_size``,
    read from it), so that a fine-tuned backbone is the probed one."""
    with _CONFIG_LOCK:
        backbone = Config.fromfile(
            osp.join(ROOT, APE_PROBE_CONFIG)).model.backbone
    return [f'model.backbone.use_ape={backbone.use_ape}',
            f'model.backbone.img_size={backbone.img_size}']


def pretrain(config, root, init, data_root, iters=None, options=(),
             threads=None, pretrain_seed=None, ape=False, probe_config=None):
    """Pretrain ``config`` on ``data_root/unlabeled`` into
    ``root/pretraining/<init>`` (with ``pretrain_seed``: ``.../pseed<p>``,
    trained with ``randomness.seed=<p>``); returns the backbone checkpoint
    extracted for the detection config (no key may be missing; keys it has
    no place for are left out), or with ``ape`` for
    :func:`ape_probe_config` of ``probe_config`` (the APE kept; ICPF's
    positional field exported on its grid). With ``threads`` (runs in
    parallel) it trains with that many threads and its output goes to
    ``<work dir>/console.log``."""
    work_dir = pretrain_dir(root, init, pretrain_seed)
    backbone = osp.join(work_dir, 'backbone.pth')
    if _fresh(work_dir):
        start = time.time()
        opts = ['train_dataloader.dataset.data_root='
                f'{osp.join(data_root, "unlabeled")}/', *options]
        if pretrain_seed is not None:
            opts.append(f'randomness.seed={pretrain_seed}')
        if iters:
            opts += schedule_options(config, iters)
        cpu = run([sys.executable, 'tools/train.py', config, '--work-dir',
                   work_dir, '--cfg-options', *opts],
                  log=_console(work_dir, threads), threads=threads)
        run([sys.executable, 'tools/model_converters/mmpos2backbone.py',
             last_checkpoint(work_dir), backbone, '--config',
             ape_probe_config(probe_config) if ape else
             TASKS['detection']['config'],
             '--drop-unexpected'])
        _finish(work_dir, start, cpu)
    return backbone


def data_options(task, data_root):
    """``--cfg-options`` pointing a task's config at ``data_root``."""
    root = osp.join(data_root, TASKS[task]['data']) + '/'
    options = [f'{split}_dataloader.dataset.data_root={root}'
               for split in ('train', 'val', 'test')]
    if task == 'detection':
        ann = root + 'annotations/instances_val2017.json'
        options += [f'val_evaluator.ann_file={ann}',
                    f'test_evaluator.ann_file={ann}']
    return options


def random_backbone(root, init, pretrain_seed):
    """The transfer backbone at random init drawn with ``pretrain_seed``
    (``init_weights`` under ``torch.manual_seed``), saved as
    ``root/pretraining/<init>/pseed<p>/backbone.pth``: random init's
    counterpart of a pretraining seed, so that its transfers vary over
    backbone draws as a method's do over pretraining runs."""
    work_dir = pretrain_dir(root, init, pretrain_seed)
    backbone = osp.join(work_dir, 'backbone.pth')
    if _fresh(work_dir):
        import torch

        from mmpos.apis.features import build_backbone
        from mmpos.checkpoint import save_state_dict
        start, cpu = time.time(), time.process_time()
        os.makedirs(work_dir)
        with _CONFIG_LOCK:
            torch.manual_seed(pretrain_seed)
            model = build_backbone(osp.join(ROOT,
                                            TASKS['detection']['config']))
        save_state_dict(model.state_dict(), backbone)
        _finish(work_dir, start, time.process_time() - cpu)
    return backbone


def transfer(root, task, init, seed, data_root, backbone=None, iters=None,
             threads=None, pretrain_seed=None, ape=False):
    """One transfer run (train, final evaluation) of ``task`` from
    ``backbone`` (None: random init) with ``seed``; returns its metrics.
    With ``threads`` (runs in parallel) it runs with that many threads and
    its output goes to ``<work dir>/console.log``; ``pretrain_seed`` puts it
    under ``.../pseed<p>/`` (:func:`~.seeds.transfer_dir`); ``ape``: the
    backbone keeps its APE (:func:`ape_options`)."""
    work_dir = transfer_dir(root, task, init, seed, pretrain_seed)
    if _fresh(work_dir):
        start = time.time()
        options = data_options(task, data_root) + [f'randomness.seed={seed}']
        if backbone:
            options.append(f'model.backbone.init_cfg.checkpoint={backbone}')
        if ape:
            options += ape_options()
        if iters:
            options += [f'train_cfg.max_iters={iters}',
                        f'train_cfg.val_interval={iters}']
        cpu = run([sys.executable, 'tools/train.py', TASKS[task]['config'],
                   '--work-dir', work_dir, '--cfg-options', *options],
                  log=_console(work_dir, threads), threads=threads)
        _finish(work_dir, start, cpu)
    return read_run(work_dir).metrics


def probe(root, task, init, seed, data_root, backbone, pretrain_seed=None,
          iters=None, threads=None, ape=False, probe_config=None):
    """One frozen probe (:data:`PROBES`) of ``backbone`` on
    ``data_root/<its data>`` into :func:`~.seeds.transfer_dir`; returns its
    metrics. ``iters`` shortens the linear and depth probes' training;
    ``ape``: the backbone keeps its APE (:func:`ape_probe_config` of
    ``probe_config``, by default the probes' own backbone with it)."""
    spec = PROBES[task]
    work_dir = transfer_dir(root, task, init, seed, pretrain_seed)
    if _fresh(work_dir):
        start = time.time()
        data = osp.join(data_root, spec['data'])
        config = ape_probe_config(probe_config) if ape else spec['config']
        cmd = [sys.executable, spec['tool'], config, backbone,
               '--work-dir', work_dir]
        if task == 'knn':
            cmd += ['--data', KNN_DATA,
                    '--data-root', data, '--size', str(DATA['img_size']),
                    '--center-crop', '1', '--features', 'avg']
        elif 'probe' in spec:
            cmd += ['--probe', spec['probe'], '--data-root', data,
                     '--pictures', '0']
            if spec['seeded']:
                cmd += ['--seed', str(seed)]
            if iters and task == 'depth':
                cmd += ['--iters', str(iters)]
        else:
            options = [f'{split}_dataloader.dataset.data_root={data}/'
                       for split in ('train', 'val', 'test')]
            options.append(f'randomness.seed={seed}')
            if iters:
                options += schedule_options(config, iters) + [
                    f'train_cfg.val_interval={iters}']
            cmd += ['--cfg-options', *options]
        cpu = run(cmd, log=_console(work_dir, threads), threads=threads)
        _finish(work_dir, start, cpu)
    return read_run(work_dir).metrics


def compare(root, methods, seeds, data_root, jobs=2, iters=None,
            pretrain_seeds=None, tasks=None, probe_iters=None, ape=(),
            probe_config=None):
    """Pretrain each of ``methods`` once per pretraining seed and run every
    task of every init for every transfer seed, under ``root``; returns
    ``{(init, pretrain_seed): backbone or None}``.

    Args:
        methods: ``[(init, config, pretrain_iters, options)]``; ``config``
            None is a random init (with pretraining seeds one backbone drawn
            per seed, :func:`random_backbone`; without, the task config's
            own init), ``pretrain_iters`` None keeps the config's schedule
            (else :func:`schedule_options` stretches it), ``options`` extra
            ``--cfg-options`` of its pretraining.
        pretrain_seeds: None: one pretraining run per method, in
            ``pretraining/<init>`` (runs keyed by seed None); else one per
            seed, ``pretraining/<init>/pseed<p>``, and every transfer run
            of that backbone under ``.../pseed<p>/``.
        tasks: ``{task: spec}`` of :data:`TASKS` / :data:`PROBES` (default
            :data:`TASKS`); a spec's ``seeds`` overrides ``seeds``.
        jobs: runs at a time; above 1 each is single-threaded with its
            output in ``<work dir>/console.log`` (pretrainings run beside
            the random-init transfers, a method's transfers start once its
            backbone is there; tasks run in ``tasks``' order, detection
            first by default, so the short runs fill the end). 1: one run
            at a time with all threads, its log on the console.
        ape: the inits evaluated with the APE they pretrained with: their
            checkpoints are extracted for and probed with
            :func:`ape_probe_config` of ``probe_config`` (default
            :data:`APE_PROBE_CONFIG`; e.g. a narrower student's own).

    A failed run stops the queued ones; the finished runs stay (the
    comparison resumes, see :func:`_fresh`).
    """
    threads = 1 if jobs > 1 else None
    tasks = tasks or TASKS
    pseeds = [None] if pretrain_seeds is None else list(pretrain_seeds)
    with ThreadPoolExecutor(jobs) as pool:
        backbones = {}
        for init, config, pretrain_iters, options in methods:
            for p in pseeds:
                if config:
                    backbones[init, p] = pool.submit(
                        pretrain, config, root, init, data_root,
                        pretrain_iters, options, threads, p, init in ape,
                        probe_config)
                elif p is not None:
                    backbones[init, p] = pool.submit(random_backbone, root,
                                                     init, p)
                else:
                    backbones[init, p] = None

        def one(task, init, p, seed):
            backbone = backbones[init, p] and backbones[init, p].result()
            if task in PROBES:
                return probe(root, task, init, seed, data_root, backbone
                             or random_backbone(root, init, seed), p,
                             probe_iters, threads, init in ape,
                             probe_config)
            return transfer(root, task, init, seed, data_root, backbone,
                            iters, threads, p, init in ape)

        inits = list(dict.fromkeys(init for init, *_ in methods))
        futures = [pool.submit(one, task, init, p, seed)
                   for task, spec in tasks.items()
                   for init in reversed(inits) for p in pseeds
                   for seed in spec.get('seeds', seeds)]
        try:
            for future in [*backbones.values(), *futures]:
                if future:
                    future.result()
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise
    return {key: future and future.result()
            for key, future in backbones.items()}


def write_plan(root, title, inits, seeds, tasks=None, pretrain_seeds=None,
               budget=None, orderings=None):
    """``root/plan.json`` for :mod:`mmpos_harness.comparison.seeds`.

    Args:
        tasks: ``{task: spec}`` (default :data:`TASKS`); a spec's ``label``,
            ``metrics``, ``scale`` and ``seeds`` (its own transfer seeds,
            e.g. one for a probe that draws nothing) are written.
        pretrain_seeds: the pretraining seeds (None: one pretraining run
            per init, the demo's layout).
        budget: what every method got (batch, images, tuning), shown above
            the table.
        orderings: claimed orderings ``[(better, worse, source)]`` between
            the inits, checked in ``orderings.md``
            (:func:`~mmpos_harness.comparison.seeds.orderings`).
    """
    os.makedirs(root, exist_ok=True)
    keys = ('label', 'metrics', 'scale', 'seeds')
    tasks = {name: {k: t[k] for k in keys if k in t}
             for name, t in (tasks or TASKS).items()}
    plan = dict(title=title, seeds=list(seeds), reference=RANDOM_INIT,
                inits=list(inits), tasks=tasks)
    if pretrain_seeds is not None:
        plan['pretrain_seeds'] = list(pretrain_seeds)
    if budget:
        plan['budget'] = budget
    if orderings:
        plan['orderings'] = [list(claim) for claim in orderings]
    write_json(osp.join(root, PLAN), plan)
