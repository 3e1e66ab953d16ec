"""Full-size rehearsal of a config on CPU, before anyone spends GPU-weeks.

:func:`rehearse` runs a shipped config *unshrunk* (its model, input size,
pipeline, dataloader, DDP or FSDP wrapper) through ``tools/dist_train.sh``
with gloo processes and batch 1 per process, on synthetic data of the real
layout (:data:`SYNTHETIC`):

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
gets ``device_id='cpu'``. The result lists them (``changes``).

It records the time of each iteration, the peak resident memory of the
largest process, the losses (finite or not) and the iteration the resume
continued from; :func:`main` stores it with provenance in
``results/rehearsals/<config name>.json``. A config that fails at full
size fails here with its own error.
"""
import argparse
import json
import math
import os
import os.path as osp
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, Tuple

import numpy as np
from PIL import Image

from mmpos_harness import provenance

ROOT = provenance.ROOT
OUT_DIR = osp.join('results', 'rehearsals')
#: training iterations per launch (the first, then the resume)
ITERS = 2
#: ground-truth instances per synthetic COCO image (what the planner's
#: detection rows assume as well)
INSTANCES = 3


def _image(path: str, size: Tuple[int, int], seed: int) -> None:
    """A JPEG of ``size`` = (width, height): smooth colour fields plus
    noise, so that crops and photometric transforms see texture."""
    rng = np.random.default_rng(seed)
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    phase = rng.uniform(0, 2 * np.pi, 3)
    img = np.stack([127 + 80 * np.sin(xx / (17 + 9 * c) + yy / 23 + phase[c])
                    for c in range(3)], -1)
    img += rng.normal(0, 20, img.shape)
    os.makedirs(osp.dirname(path), exist_ok=True)
    Image.fromarray(img.clip(0, 255).astype(np.uint8)).save(path, quality=90)


def _imagenet(root: str, split: str, count: int) -> None:
    """``root/<split>/*.JPEG`` (500x375, ImageNet's typical size) and
    ``root/meta/<split>.txt`` with labels in 0-999."""
    lines = []
    for i in range(count):
        name = f'{split}_{i:04d}.JPEG'
        _image(osp.join(root, split, name), (500, 375), seed=i)
        lines.append(f'{name} {i * 37 % 1000}')
    os.makedirs(osp.join(root, 'meta'), exist_ok=True)
    with open(osp.join(root, 'meta', f'{split}.txt'), 'w') as f:
        f.write('\n'.join(lines) + '\n')


def _coco(root: str, ann_file: str, img_prefix: str, count: int) -> None:
    """COCO instances: ``count`` 1024x768 images under ``img_prefix``, each
    with :data:`INSTANCES` boxes and polygon masks of COCO's 80 classes."""
    from mmdet.datasets import CocoDataset
    classes = CocoDataset.METAINFO['classes']
    images, annotations = [], []
    for i in range(count):
        name = f'{i:012d}.jpg'
        _image(osp.join(root, img_prefix, name), (1024, 768), seed=100 + i)
        images.append(dict(id=i + 1, file_name=name, width=1024, height=768))
        for k in range(INSTANCES):
            x, y = 80 + 280 * k, 100 + 150 * k
            w, h = 200, 260
            annotations.append(dict(
                id=len(annotations) + 1, image_id=i + 1, iscrowd=0,
                category_id=(i * INSTANCES + k) % len(classes) + 1,
                bbox=[x, y, w, h], area=w * h,
                segmentation=[[x, y, x + w, y, x + w, y + h, x, y + h]]))
    categories = [dict(id=j + 1, name=c) for j, c in enumerate(classes)]
    path = osp.join(root, ann_file)
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        json.dump(dict(images=images, annotations=annotations,
                       categories=categories), f)


def _ade20k(root: str, img_dir: str, seg_dir: str, count: int) -> None:
    """ADE20K: ``count`` 683x512 JPEGs and label PNGs (0 = other, 1-150
    the classes; mmseg reduces 0 to ignore)."""
    for i in range(count):
        name = f'ADE_{i:08d}'
        _image(osp.join(root, img_dir, name + '.jpg'), (683, 512),
               seed=200 + i)
        labels = (np.arange(683)[None, :] // 60 + np.arange(512)[:, None]
                  // 60 + 7 * i) % 151
        os.makedirs(osp.join(root, seg_dir), exist_ok=True)
        Image.fromarray(labels.astype(np.uint8)).save(
            osp.join(root, seg_dir, name + '.png'))


def _write_imagenet(ds: dict, root: str, count: int) -> None:
    _imagenet(root, ds['split'], count)


def _write_coco(ds: dict, root: str, count: int) -> None:
    _coco(root, ds['ann_file'], ds['data_prefix']['img'], count)


def _write_ade20k(ds: dict, root: str, count: int) -> None:
    prefix = ds['data_prefix']
    _ade20k(root, prefix['img_path'], prefix['seg_map_path'], count)


#: dataset type -> (folder name under the synthetic root, writer of
#: ``count`` samples of the dataset dict's layout)
SYNTHETIC: Dict[str, Tuple[str, Callable]] = {
    'ImageNet': ('imagenet', _write_imagenet),
    'CocoDataset': ('coco', _write_coco),
    'ADE20KDataset': ('ade20k', _write_ade20k),
}
LOADERS = ('train_dataloader', 'val_dataloader', 'test_dataloader')


def _replace_prefix(node, old: str, new: str):
    """``node`` with every string that starts with the path ``old``
    re-rooted at ``new`` (the datasets' roots and the evaluators' files)."""
    if isinstance(node, dict):
        return type(node)({k: _replace_prefix(v, old, new)
                           for k, v in node.items()})
    if isinstance(node, (list, tuple)):
        return type(node)(_replace_prefix(v, old, new) for v in node)
    if isinstance(node, str) and (node == old or node.startswith(old + '/')):
        return new + node[len(old):]
    return node


def synthesize(cfg, data_root: str, procs: int, batch: int = 1
               ) -> List[str]:
    """Write synthetic data for every dataset of ``cfg``'s dataloaders
    under ``data_root`` and point ``cfg`` at it (in place); returns what
    was written, a line each.

    Training sets hold ``procs * batch * ITERS`` samples (one epoch is
    :data:`ITERS` iterations of ``batch`` per process); validation and
    test sets ``procs`` samples (one step of batch 1 per process).

    Raises:
        ValueError: a dataset type without a synthetic layout, naming it.
    """
    written, roots = [], {}
    for key in LOADERS:
        loader = cfg.get(key)
        if not loader:
            continue
        ds = loader['dataset']
        if ds['type'] not in SYNTHETIC:
            raise ValueError(
                f'rehearse: {key}.dataset.type={ds["type"]!r} has no '
                f'synthetic layout (known: {", ".join(sorted(SYNTHETIC))})')
        folder, write = SYNTHETIC[ds['type']]
        old = ds['data_root'].rstrip('/')
        new = roots.setdefault(old, osp.join(data_root, folder))
        count = procs * (batch * ITERS if key == 'train_dataloader' else 1)
        write(ds, new, count)
        written.append(f'{key}: {count} synthetic {ds["type"]} samples '
                       f'in {folder}/')
    for old, new in roots.items():
        for key in list(cfg.keys()):
            cfg[key] = _replace_prefix(cfg[key], old, new)
    return written


def rehearsal_config(cfg, data_root: str, procs: int) -> List[str]:
    """Change ``cfg`` in place for a rehearsal (module docstring); returns
    the changes, a line each.

    Training batches are 1 per process, 2 where SyncBN became BN: BN in
    training needs 2 values per channel, and heads such as UperNet's
    pyramid pooling reduce a sample to 1x1 (SyncBN saw every GPU's).
    """
    changes = []
    if _sync_bn_to_bn(cfg.model):
        changes.append('SyncBN -> BN (torch\'s SyncBatchNorm needs CUDA), '
                       'training batch 2 per process')
    batch = 2 if changes else 1
    changes += synthesize(cfg, data_root, procs, batch)
    for key in LOADERS:
        if cfg.get(key):
            cfg[key].batch_size = batch if key == 'train_dataloader' else 1
            cfg[key].num_workers = min(cfg[key].get('num_workers', 0), 1)
            cfg[key].persistent_workers = cfg[key].num_workers > 0
    changes.append(f'batch {batch} per process, at most 1 dataloader worker')
    by_epoch = 'max_epochs' in cfg.train_cfg
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
    return changes


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
        RuntimeError: the launch failed; the message ends with its log.
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
            tail = ''.join(f.readlines()[-40:])
        raise RuntimeError(f'rehearse: {" ".join(cmd)} exited '
                           f'{proc.returncode}:\n{tail}')
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
