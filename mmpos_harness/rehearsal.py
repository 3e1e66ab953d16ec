"""Full-size rehearsal of a config on CPU, before anyone spends GPU-weeks.

:func:`rehearse` runs a shipped config *unshrunk* (its model, input size,
pipeline, dataloader, DDP or FSDP wrapper) through ``tools/dist_train.sh``
with gloo processes and batch 1 per process, on synthetic data of the real
layout (:mod:`mmpos.datasets.synthetic`):

1. 2 training iterations (one epoch of 2 iterations for an epoch-based
   loop), one validation pass where the config has a validation loop, and
   a checkpoint save;
2. a second launch with ``--resume`` that continues from that checkpoint
   for 2 more iterations.

What a rehearsal changes, and nothing else (:func:`rehearsal_config`):
the datasets' roots (to the synthetic data), batch size 1 (2 where SyncBN
became BN) and at most one worker per dataloader, the loop length, the
logging and checkpoint intervals, mmengine's ``AmpOptimWrapper`` for the
fp32 ``OptimWrapper`` and ``SyncBN`` for ``BN`` (both need CUDA); FSDP
gets ``device_id='cpu'``; a checkpoint another run writes is not there
(:func:`_absent_checkpoints`): a frozen teacher gets a synthetic one at its
random initialisation, as the data are synthetic, and ``load_from`` or a
``Pretrained`` ``init_cfg`` is dropped. The result lists them
(``changes``).

It records the time of each iteration, the peak resident memory of the
largest process, the losses (finite or not) and the iteration the resume
continued from; :func:`main` stores it with provenance in
``results/rehearsals/<config name>.json``. A config that fails at full
size fails here with its own error.
"""
import argparse
import copy
import inspect
import json
import math
import os
import os.path as osp
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import List, Tuple

from mmpos.datasets.synthetic import LOADERS, synthesize
from mmpos_harness import provenance

ROOT = provenance.ROOT
OUT_DIR = osp.join('results', 'rehearsals')
#: training iterations per launch (the first, then the resume)
ITERS = 2


def rehearsal_config(cfg, data_root: str, procs: int) -> List[str]:
    """Change ``cfg`` in place for a rehearsal (module docstring); returns
    the changes, a line each.

    Training batches are 1 per process, 2 where SyncBN became BN (BN in
    training needs 2 values per channel, and heads such as UperNet's
    pyramid pooling reduce a sample to 1x1; SyncBN saw every GPU's), where
    the model has a KoLeo loss (:func:`_koleo`: each image's nearest
    neighbour among its process's batch) or a ``BatchNorm1d`` that trains
    (:func:`_batchnorm_1d`).
    """
    changes = []
    if _sync_bn_to_bn(cfg.model):
        changes.append('SyncBN -> BN (torch\'s SyncBatchNorm needs CUDA), '
                       'training batch 2 per process')
    elif _koleo(cfg.model):
        changes.append('training batch 2 per process (KoLeo takes each '
                       'image\'s nearest neighbour in the process\'s batch)')
    elif _batchnorm_1d(cfg.model):
        changes.append('training batch 2 per process (a BatchNorm1d that '
                       'trains needs 2 values per channel)')
    batch = 2 if changes else 1
    changes += synthesize(cfg, data_root, procs, batch, ITERS)
    for key in LOADERS:
        if cfg.get(key):
            cfg[key].batch_size = batch if key == 'train_dataloader' else 1
            cfg[key].num_workers = min(cfg[key].get('num_workers', 0), 1)
            cfg[key].persistent_workers = cfg[key].num_workers > 0
    changes.append(f'batch {batch} per process, at most 1 dataloader worker')
    by_epoch = 'max_epochs' in cfg.train_cfg
    changes += _pin_scheduler_ends(cfg)
    if by_epoch:
        cfg.train_cfg.max_epochs = 1
    else:
        cfg.train_cfg.max_iters = ITERS
    cfg.train_cfg.val_interval = 1 if by_epoch else ITERS
    changes.append(f'{ITERS} iterations' + (' (1 epoch)' if by_epoch else ''))
    hooks = cfg.default_hooks
    hooks.logger.interval = 1
    hooks.checkpoint.interval = 1 if by_epoch else ITERS
    hooks.checkpoint.pop('save_best', None)
    wrapper = cfg.optim_wrapper
    if wrapper.get('type') == 'AmpOptimWrapper':
        wrapper.type = 'OptimWrapper'
        for key in ('loss_scale', 'dtype', 'use_fsdp'):
            wrapper.pop(key, None)
        changes.append('AmpOptimWrapper -> fp32 OptimWrapper (mmengine\'s '
                       'AMP wrapper needs CUDA)')
    if cfg.get('strategy', {}).get('type') == 'MMPosFSDPStrategy':
        cfg.strategy.model_wrapper.device_id = 'cpu'
        changes.append('FSDP model_wrapper.device_id=cpu (gloo)')
    return changes + _absent_checkpoints(cfg, data_root)


def _absent(path) -> bool:
    return not path or not osp.isfile(osp.join(ROOT, path))


def _absent_checkpoints(cfg, root: str) -> List[str]:
    """Stand-ins for the checkpoints ``cfg`` reads that are not there
    (another run writes them: a pretraining, a probe; a teacher's), in
    place; returns the changes. A frozen teacher, which refuses random
    weights, gets a synthetic checkpoint (the configured network at its
    random initialisation: :func:`synthetic_teacher`, or CR2PQ's
    ``target`` for its ``teacher_checkpoint``); ``load_from`` and
    ``Pretrained`` ``init_cfg`` entries are dropped, the weights they would
    load starting at their random initialisation (what a step costs does
    not depend on them)."""
    changes, model = [], cfg.model
    teacher = model.get('teacher')
    if teacher and _absent(teacher.get('checkpoint')):
        was = teacher.get('checkpoint')
        teacher.checkpoint = synthetic_teacher(
            teacher, osp.join(root, 'teacher.pth'))
        changes.append(f'model.teacher.checkpoint={was!r}: a synthetic '
                       'teacher (the configured teacher at its random '
                       'initialisation)')
    if model.get('teacher_checkpoint') and _absent(model.teacher_checkpoint):
        was, model.teacher_checkpoint = model.teacher_checkpoint, \
            synthetic_network(model.target, osp.join(root, 'target.pth'))
        changes.append(f'model.teacher_checkpoint={was!r}: a synthetic '
                       'teacher (model.target at its random initialisation)')
    if cfg.get('load_from') and _absent(cfg.load_from):
        changes.append(f'load_from={cfg.load_from!r} dropped (absent: '
                       'random initialisation)')
        cfg.load_from = None
    for where, path in _drop_absent_pretrained(model, 'model'):
        changes.append(f'{where}.init_cfg Pretrained {path!r} dropped '
                       '(absent: random initialisation)')
    return changes


def _drop_absent_pretrained(node, where: str) -> List[Tuple[str, str]]:
    """Remove the ``Pretrained`` ``init_cfg`` entries of absent files
    under ``node`` (a model config; ``checkpoint=None``, an explicit random
    initialisation, stays); returns ``(where, path)`` of each."""
    dropped = []
    if isinstance(node, dict):
        init = node.get('init_cfg')
        entries = init if isinstance(init, list) else [init]
        keep = []
        for entry in entries:
            if isinstance(entry, dict) and entry.get('type') == 'Pretrained' \
                    and entry.get('checkpoint') and _absent(entry['checkpoint']):
                dropped.append((where, entry.get('checkpoint')))
            else:
                keep.append(entry)
        if len(keep) < len(entries):
            node['init_cfg'] = keep if isinstance(init, list) else None
        for key, value in node.items():
            if key != 'init_cfg':
                dropped += _drop_absent_pretrained(value, f'{where}.{key}')
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            dropped += _drop_absent_pretrained(value, f'{where}[{i}]')
    return dropped


def synthetic_network(network: dict, path: str) -> str:
    """Write the model config ``network`` at its random initialisation
    to ``path`` (``{'state_dict': ...}``); returns ``path``."""
    from mmengine.registry import init_default_scope

    from mmpos.registry import MODELS
    init_default_scope('mmpos')
    return _save_initial(MODELS.build(network), path)


def synthetic_teacher(teacher: dict, path: str) -> str:
    """Write the frozen teacher ``teacher`` (a :class:`~mmpos.models.selfsup.
    distill.FrozenTeacher` config) at its random initialisation to
    ``path``, its weights under the config's ``prefix`` as in a DINOv2
    checkpoint's ``state_dict``, for a rehearsal: what it costs does not
    depend on what the teacher knows. Returns ``path``."""
    from mmengine.registry import init_default_scope

    from mmpos.models.selfsup.distill.distill import FrozenTeacher
    init_default_scope('mmpos')
    model = FrozenTeacher(**teacher)  # builds; init_weights would load
    return _save_initial(model, path, model.prefix)


def _save_initial(model, path: str, prefix: str = '') -> str:
    """``torch.save`` ``model``'s weights as they are, each key under
    ``prefix``, as ``{'state_dict': ...}`` at ``path``; returns ``path``."""
    import torch
    os.makedirs(osp.dirname(path), exist_ok=True)
    torch.save({'state_dict': {prefix + k: v for k, v in
                               model.state_dict().items()}}, path)
    return path


def _pin_scheduler_ends(cfg) -> List[str]:
    """Give each parameter scheduler without an ``end`` the one mmengine
    would give it from the config's own loop (its max epochs or
    iterations), before the rehearsal shortens the loop: the schedule stays
    the config's, and one that begins after the rehearsal's end (a cosine
    after 20 warm-up epochs) is not refused as ending before it begins."""
    schedulers = cfg.get('param_scheduler') or []
    if isinstance(schedulers, dict):
        schedulers = [schedulers]
    pinned = []
    for scheduler in schedulers:
        if 'end' not in scheduler:
            scheduler['end'] = cfg.train_cfg.get(
                'max_epochs' if scheduler.get('by_epoch', True)
                else 'max_iters')
            pinned.append(f'{scheduler["type"]}.end={scheduler["end"]}')
    return [f'param_scheduler ends pinned to the config\'s loop before it '
            f'is shortened: {", ".join(pinned)}'] if pinned else []


def _batchnorm_1d(model: dict) -> bool:
    """Whether the model ``model`` (a config, built: constructors read
    tensor values, so not on the meta device) has a ``BatchNorm1d`` that
    trains, e.g. a linear probe's (:mod:`mmpos.models.heads.probe_heads`),
    which a batch of one refuses."""
    import torch
    from mmengine.registry import init_default_scope

    from mmpos.registry import MODELS
    init_default_scope('mmpos')
    built = MODELS.build(copy.deepcopy(model)).train()
    return any(isinstance(m, torch.nn.BatchNorm1d) and m.training
               for m in built.modules())


def _koleo(model: dict) -> bool:
    """Whether the model ``model`` (a config) has a KoLeo loss: its
    ``koleo_loss``, or its class's default where the config gives none
    (DINOv2 and the methods built on it)."""
    from mmengine.registry import init_default_scope

    from mmpos.registry import MODELS
    init_default_scope('mmpos')
    if 'koleo_loss' in model:
        return bool(model['koleo_loss'])
    for cls in getattr(MODELS.get(model['type']), '__mro__', ()):
        param = inspect.signature(cls.__init__).parameters.get('koleo_loss')
        if param is not None:  # the nearest class that names it
            return bool(param.default)
    return False


def _sync_bn_to_bn(node) -> int:
    """Turn every ``dict(type='SyncBN')`` under ``node`` into ``'BN'`` in
    place (torch's SyncBatchNorm needs CUDA); returns how many."""
    count = 0
    if isinstance(node, dict):
        if node.get('type') == 'SyncBN':
            node['type'] = 'BN'
            count += 1
        for value in node.values():
            count += _sync_bn_to_bn(value)
    elif isinstance(node, (list, tuple)):
        count += sum(_sync_bn_to_bn(value) for value in node)
    return count


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _launch(config: str, work_dir: str, procs: int, extra: List[str],
            log: str) -> Tuple[float, float]:
    """``tools/dist_train.sh config procs --work-dir work_dir *extra``;
    returns (wall seconds, peak resident MiB of its largest process).

    Raises:
        RuntimeError: the launch failed; the message names the first error
            a rank raised and ends with the log's last lines.
    """
    env = dict(os.environ, PYTHON=sys.executable, PORT=str(_free_port()),
               OMP_NUM_THREADS=os.environ.get('OMP_NUM_THREADS', '1'))
    cmd = ['bash', osp.join(ROOT, 'tools', 'dist_train.sh'), config,
           str(procs), '--work-dir', work_dir, *extra]
    start = time.time()
    with open(log, 'w') as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.time() - start
    if proc.returncode:
        with open(log) as f:
            lines = f.readlines()
        # a rank's exception (the launcher's own comes last)
        first = next((line.strip() for line in lines if re.search(
            r'(\b\w+(Error|Exception)|\S+: error): ', line)
            and 'ChildFailedError' not in line), 'none')
        raise RuntimeError(f'rehearse: {" ".join(cmd)} exited '
                           f'{proc.returncode}; first error: {first}\n'
                           f'{"".join(lines[-40:])}')
    # Linux: ru_maxrss of a reaped child is the largest of it and of the
    # descendants it reaped (the ranks, their dataloader workers), in KiB
    return wall, usage.ru_maxrss / 1024


def _scalars(work_dir: str) -> List[dict]:
    """The records of every ``vis_data/scalars.json`` under ``work_dir``,
    in the order of their runs."""
    records = []
    for stamp in sorted(os.listdir(work_dir)):
        path = osp.join(work_dir, stamp, 'vis_data', 'scalars.json')
        if osp.isfile(path):
            with open(path) as f:
                records += [json.loads(line) for line in f if line.strip()]
    return records


def rehearse(config: str, procs: int = 2, work_root: str = None) -> dict:
    """Rehearse ``config`` (a path relative to the repository) with
    ``procs`` gloo processes; returns the result (module docstring).

    Raises:
        RuntimeError: a launch failed, or a loss was not finite, or the
            resume did not continue from the saved iteration.
    """
    from mmpos.guardrails.launch import load_config
    cfg = load_config(osp.join(ROOT, config))
    own_root = work_root is None
    work_root = work_root or tempfile.mkdtemp(prefix='mmpos_rehearsal_')
    try:
        changes = rehearsal_config(cfg, osp.join(work_root, 'data'), procs)
        path = osp.join(work_root, 'rehearsal_config.py')
        cfg.dump(path)
        work_dir = osp.join(work_root, 'work')
        wall, peak = _launch(path, work_dir, procs, [],
                             osp.join(work_root, 'first.log'))
        more = ('train_cfg.max_epochs=2' if 'max_epochs' in cfg.train_cfg
                else f'train_cfg.max_iters={2 * ITERS}')
        wall2, peak2 = _launch(path, work_dir, procs,
                               ['--resume', '--cfg-options', more],
                               osp.join(work_root, 'resume.log'))
        records = _scalars(work_dir)
    finally:
        if own_root:
            shutil.rmtree(work_root, ignore_errors=True)
    steps = [r for r in records if 'loss' in r]
    losses = [r['loss'] for r in steps]
    iters = [r['iter'] for r in steps]
    if iters != list(range(1, 2 * ITERS + 1)):
        raise RuntimeError(f'rehearse: {config}: logged training iterations '
                           f'{iters}, expected 1-{2 * ITERS} across the '
                           'resume')
    if not all(math.isfinite(v) for v in losses):
        raise RuntimeError(f'rehearse: {config}: losses {losses}')
    # validation records: mmengine logs one per validation pass (time and
    # the metrics, none where an untrained detector finds no box)
    val_records = [r for r in records if 'loss' not in r]
    val = {k for r in val_records for k in r
           if k not in ('step', 'iter', 'epoch', 'time', 'data_time')}
    return dict(config=config, procs=procs,
                batch_per_process=cfg.train_dataloader.batch_size,
                changes=changes, iter_seconds=[r['time'] for r in steps],
                losses=losses, resumed_at=ITERS,
                val_passes=len(val_records), val_metrics=sorted(val),
                peak_rss_mib=round(max(peak, peak2), 1),
                wall_seconds=round(wall + wall2, 1))


def markdown(out_dir: str = OUT_DIR,
             manifest: str = 'tools/paper_tables/manifest.yaml') -> str:
    """The stored rehearsals of ``out_dir`` as the distributed-training
    page shows them: how many there are and how many of the paper
    tables' manifest configs they cover, then a row per result (config
    name, processes x batch per process, peak resident memory of the
    largest process, the median seconds of its iterations, the first and
    the last loss), sorted by name."""
    from mmpos_harness.paper_tables.manifest import load_manifest
    found = load_manifest(osp.join(ROOT, manifest))
    wanted = {run.config for run in found.runs.values()}
    results = []
    for name in sorted(os.listdir(osp.join(ROOT, out_dir))):
        if name.endswith('.json'):
            with open(osp.join(ROOT, out_dir, name)) as f:
                results.append(json.load(f))
    covered = sum(r['config'] in wanted for r in results)
    lines = [f'{len(results)} stored rehearsals, {covered} of the '
             f'{len(wanted)} configs of the paper tables\' manifest '
             f'(`{manifest}`), in `{out_dir}/`; times on the shared 2-core '
             'CPU, not a benchmark:', '',
             '| config | processes x batch | peak per process | '
             's / iteration (median) | loss (first, last) |',
             '| --- | --- | --- | --- | --- |']
    for r in results:
        median = statistics.median(r['iter_seconds'])
        lines.append(
            f'| `{osp.basename(r["config"])}` | {r["procs"]} x '
            f'{r["batch_per_process"]} | {r["peak_rss_mib"]:,.0f} MiB | '
            f'{median:.1f} | {r["losses"][0]:.4g}, {r["losses"][-1]:.4g} |')
    return '\n'.join(lines) + '\n'


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog='rehearse.py', description=__doc__.split('\n\n')[0])
    parser.add_argument('configs', nargs='+', help='config paths')
    parser.add_argument('--procs', type=int, default=2,
                        help='gloo processes (1 where 2 do not fit)')
    parser.add_argument('--out-dir', default=OUT_DIR,
                        help='where results/<config name>.json go')
    parser.add_argument('--redo', action='store_true',
                        help='rehearse configs that have a result already')
    args = parser.parse_args(argv)
    for config in args.configs:
        config = osp.relpath(osp.abspath(config), ROOT)
        out = osp.join(ROOT, args.out_dir,
                       osp.splitext(osp.basename(config))[0] + '.json')
        if osp.exists(out) and not args.redo:
            print(f'rehearse: {config}: stored ({out}); --redo to repeat')
            continue
        print(f'rehearse: {config} with {args.procs} process(es) ...',
              flush=True)
        result = rehearse(config, args.procs)
        result['provenance'] = provenance.record(
            ' '.join(['python tools/misc/rehearse.py', config, '--procs',
                      str(args.procs)]),
            [config, 'mmpos_harness/rehearsal.py', 'tools/misc/rehearse.py'])
        os.makedirs(osp.dirname(out), exist_ok=True)
        with open(out, 'w') as f:
            json.dump(result, f, indent=1)
        print(f'rehearse: {config}: {len(result["losses"])} iterations, '
              f'{result["peak_rss_mib"]:.0f} MiB peak per process, '
              f'{result["wall_seconds"]:.0f} s -> {out}', flush=True)
