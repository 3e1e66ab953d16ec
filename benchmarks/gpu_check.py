"""The planner against a real GPU: peak memory and step time of three paper
configs at their per-GPU batch, beside ``mmpos.analysis.plan``'s prediction
for the same config and batch (#59 item 5; ``gpu_check.sh`` runs it on a
machine without network).

Cases (:data:`CASES`):

* ``droppos_vit-b``: DropPos ViT-B/16 pretraining
  (``configs/droppos/droppos_vit-base-p16_8xb512-coslr-200e_in1k.py``,
  512 images per GPU);
* ``rope-mixed_vit-b_supervised``: RoPE-Mixed ViT-B/16 supervised on
  ImageNet at 192 px (``configs/rope_vit/vit-base-p16_rope-mixed_8xb256-
  400e_in1k-192px.py``, 256 per GPU);
* ``vitdet_vit-b_backbone_1024``: the ViTDet ViT-B backbone of
  ``configs/transfer/mmdet/vitdet_mask-rcnn_vit-base-p16-ape_mln-fpn_lsj-
  1024_8xb2-12e_coco.py`` alone at 1024 x 1024, 2 per GPU: the backbone
  under mmpretrain's ``ImageClassifier`` (global pooling of the last
  output, a linear head; :func:`backbone_config`), so that neither the
  planner nor the step needs mmdet or mmcv's ops.

For each case, at its batch (``--batch`` overrides it for all):

1. **Measured** (:func:`measure_step`): the planner's step
   (``plan.real_step``) run for real on the device: a batch of the
   config's own train pipeline on a synthetic image, the data
   preprocessor, the model's loss, backward and the config's optimizer
   wrapper without loss scaling (autocast in its AMP dtype), EMA teachers
   copied from their students. Peak: parameters, buffers and optimizer state
   after a first step, plus the peak the second step adds
   (``_timing.peak_memory``: CUDA ``max_memory_allocated``; CPU: the
   profiler's allocator events), as ``tests/analysis/test_plan.py``
   measures it. Time: the median of ``--iters`` steps after ``--warmup``
   (``_timing.time_steps``, the device synchronised around each). On CUDA
   out of memory the batch is halved and the step retried; the batches
   that failed are recorded (``oom_batches``).
2. **Planned**: ``plan.plan(cfg, batch, image_size)`` at the batch that
   ran (fake tensors, on the CPU).
3. **Compared**: ``mem_ratio`` = planned / measured peak (target: within
   10 %); ``achieved_tflops`` = the planner's FLOPs of the step / measured
   time; on a GPU of ``plan.GPUS`` (from the device name) ``mfu`` =
   achieved / the GPU's peak in the step's precision: the MFU the planner
   should use for that config, beside its assumed ``plan.MFU`` and the step
   time it predicts at that MFU. fp32 steps run with torch's defaults (no
   TF32), the planner's fp32 peak.

Where mmcv's CUDA ops run (``mmcv.ops.nms`` on a CUDA tensor), the mini
Mask R-CNN (``configs/demo/vitdet_mask-rcnn_vit-tiny-rope-mixed_mini-coco
.py``) trains 4 iterations on mini-COCO through ``tools/train.py`` on the
GPU (:func:`mini_mask_rcnn`): its exit status and wall time.

``--dry-run`` (CPU, a test of the pipeline, not a measurement): batch 1, no
warm-up, one timed step; the three cases
planned, measured and written in well under a minute on a free CPU, with
tiny models of the same kinds (:data:`DRY_RUN_CASES`: the mini DropPos,
the mini RoPE ViT classifier, the mini ViTDet backbone at 128 px).

Output: ``OUT/<device>_gpu_check.json`` (``settings``, ``provenance``,
``cases``, ``mask_rcnn``) and ``.md``, rewritten after each case, so a run
stopped by its time limit keeps what it measured. ``<device>``: the CUDA
device name as a slug (``h100_80gb_hbm3``) or ``cpu``. Provenance:
``mmpos_harness.provenance.record`` (command, commit, uncommitted changes,
fingerprint) where git and the harness exist and the run is not a dry run
(``provenance.kind = 'harness'``), else a minimal record (``'minimal'``:
command, torch and CUDA versions, GPU name, date, and why).

    PYTHONPATH=. python benchmarks/gpu_check.py [--out DIR] [--batch B]
        [--cases NAME ...] [--iters 10] [--warmup 3] [--budget 330]
        [--mask-rcnn auto|off] [--dry-run]
"""
import argparse
import copy
import datetime
import gc
import json
import os.path as osp
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

import _timing
from rope_attention_device import _write, device_slug

REPO = Path(__file__).resolve().parents[1]
VITDET = ('configs/transfer/mmdet/vitdet_mask-rcnn_vit-base-p16-ape_mln-fpn_'
          'lsj-1024_8xb2-12e_coco.py')
MASK_RCNN = 'configs/demo/vitdet_mask-rcnn_vit-tiny-rope-mixed_mini-coco.py'
#: ``name: (config, synthetic image size, the backbone alone)``, and the
#: same for ``--dry-run`` (tiny models of the same kind)
CASES = {
    'droppos_vit-b':
    ('configs/droppos/droppos_vit-base-p16_8xb512-coslr-200e_in1k.py', 224,
     False),
    'rope-mixed_vit-b_supervised':
    ('configs/rope_vit/vit-base-p16_rope-mixed_8xb256-400e_in1k-192px.py',
     224, False),
    'vitdet_vit-b_backbone_1024': (VITDET, 1024, True),
}
DRY_RUN_CASES = {
    'droppos_vit-b': ('configs/droppos/droppos_vit-tiny_mini.py', 64, False),
    'rope-mixed_vit-b_supervised':
    ('configs/rope_vit/vit-mini_rope-mixed_mini-cls.py', 64, False),
    'vitdet_vit-b_backbone_1024': (MASK_RCNN, 128, True),
}


def backbone_config(cfg, size: int):
    """``cfg``'s backbone alone as an mmpretrain config: an
    ``ImageClassifier`` of the backbone (its ``img_size`` set to ``size``),
    global average pooling of its last output and a 1000-way linear head,
    fed ``size`` x ``size`` crops of the synthetic image (resize, pack);
    ``cfg``'s optimizer and wrapper type without its parameter-wise
    settings (they name the detector's neck and heads; the optimizer's
    state is the same), its batch and iterations."""
    from mmengine.config import Config
    from mmpretrain.registry import MODELS
    backbone = copy.deepcopy(cfg.model.backbone)
    backbone.update(img_size=size, init_cfg=None)
    wrapper = {k: v for k, v in cfg.optim_wrapper.items()
               if k not in ('constructor', 'paramwise_cfg')}
    arch = backbone.get('arch', 'base')
    if isinstance(arch, str):
        arch = MODELS.get(backbone.type).arch_zoo[arch]
    return Config(dict(
        default_scope='mmpretrain',
        model=dict(
            type='ImageClassifier',
            backbone=backbone,
            neck=dict(type='GlobalAveragePooling'),
            head=dict(type='LinearClsHead', num_classes=1000,
                      in_channels=arch['embed_dims'],
                      loss=dict(type='CrossEntropyLoss'))),
        data_preprocessor=dict(
            mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
            to_rgb=True),
        train_dataloader=dict(
            batch_size=cfg.train_dataloader.batch_size,
            dataset=dict(pipeline=[
                dict(type='LoadImageFromFile'),
                dict(type='Resize', scale=(size, size)),
                dict(type='PackInputs')
            ])),
        optim_wrapper=wrapper,
        train_cfg=dict(max_iters=cfg.train_cfg.get('max_iters'))),
        filename=cfg.filename)


def load_case(name: str, dry_run: bool):
    """``(cfg, image_size)`` of the case ``name``."""
    from mmpos.guardrails.launch import load_config
    path, size, backbone_only = (DRY_RUN_CASES if dry_run else CASES)[name]
    cfg = load_config(str(REPO / path))
    if backbone_only:
        cfg = backbone_config(cfg, size)
    return cfg, (size, size)


def measure_step(cfg, batch: int, image_size, device, warmup: int,
                 iters: int) -> dict:
    """The planner's step (``plan.real_step``, which ``plan.plan`` runs on
    fake tensors) run for real on ``device`` (module docstring):
    ``peak_bytes`` and its parts, ``step_s`` (median) and every timed
    step's ``times_s``."""
    from mmpos.analysis import plan as planner
    step = planner.real_step(cfg, batch, image_size, device)
    step()  # the optimizer's state exists from the second step on
    state = step.state_bytes()
    added = _timing.peak_memory(step, device)
    times, _ = _timing.time_steps(dict(step=step), device, warmup, iters)
    return dict(peak_bytes=state + added, state_bytes=state,
                step_peak_bytes=added, step_s=statistics.median(times['step']),
                times_s=times['step'])


def _free(device):
    gc.collect()
    if device.type == 'cuda':
        torch.cuda.empty_cache()


def measure_fitting(cfg, batch: int, image_size, device, warmup, iters):
    """:func:`measure_step` at ``batch``, halved after each CUDA out of
    memory: ``(batch that ran, its measurement or None, batches that did
    not fit)``."""
    oom = []
    while True:
        try:
            return batch, measure_step(cfg, batch, image_size, device,
                                       warmup, iters), oom
        except torch.cuda.OutOfMemoryError:
            oom.append(batch)
        # outside the handler: its traceback holds the failed step's model
        _free(device)
        if batch == 1:
            return batch, None, oom
        batch //= 2


def gpu_key(device):
    """The ``plan.GPUS`` entry of the CUDA ``device`` (None: CPU or a GPU
    the planner does not list)."""
    if device.type != 'cuda':
        return None
    name = torch.cuda.get_device_name(device).lower()
    gib = torch.cuda.get_device_properties(device).total_memory / 2**30
    for tag, key in (('h200', 'h200'), ('h100', 'h100-80gb'),
                     ('l40s', 'l40s')):
        if tag in name:
            return key
    if 'a100' in name:
        return 'a100-80gb' if gib > 60 else 'a100-40gb'
    return None


def compare(p, measured: dict, gpu) -> dict:
    """The planner's numbers for the plan ``p`` and, with a measurement,
    the comparison (module docstring)."""
    from mmpos.analysis import plan as planner
    row = dict(
        planned_peak_bytes=p.peak['Total'],
        planned_peak_by_kind={k: v for k, v in p.peak.items()
                              if k != 'Total'},
        params=p.params, flops_fwd_per_image=p.flops_fwd,
        flops_train_per_image=p.flops_train,
        amp=str(p.amp).replace('torch.', '') if p.amp else 'fp32',
        plan_notes=p.notes, gpu=gpu, assumed_mfu=planner.MFU)
    if gpu:
        row.update(planned_step_s=p.step_seconds(gpu),
                   gpu_peak_tflops=p.peak_tflops(gpu))
    if measured:
        flops = p.flops_train * p.batch
        row.update(mem_ratio=p.peak['Total'] / measured['peak_bytes'],
                   achieved_tflops=flops / measured['step_s'] / 1e12)
        row['mem_within_10pct'] = abs(row['mem_ratio'] - 1) <= 0.10
        if gpu:
            row['mfu'] = row['achieved_tflops'] / p.peak_tflops(gpu)
    return row


def run_case(name: str, batch, device, warmup, iters, dry_run) -> dict:
    """One case: measured, planned at the batch that ran, compared."""
    from mmpos.analysis import plan as planner
    cfg, image_size = load_case(name, dry_run)
    asked = batch or cfg.train_dataloader.batch_size
    case = (DRY_RUN_CASES if dry_run else CASES)[name]
    entry = dict(config=case[0], backbone_only=case[2],
                 image_size=list(image_size), config_batch=cfg.
                 train_dataloader.batch_size, batch_asked=asked)
    t0 = time.perf_counter()
    ran, measured, oom = measure_fitting(cfg, asked, image_size, device,
                                         warmup, iters)
    entry.update(batch=ran, oom_batches=oom, measure_s=time.perf_counter() -
                 t0)
    if measured is None:
        entry['error'] = 'out of memory at batch 1'
        return entry
    entry.update(measured)
    _free(device)
    t0 = time.perf_counter()
    p = planner.plan(cfg, ran, image_size)
    entry['plan_s'] = time.perf_counter() - t0
    entry.update(compare(p, measured, gpu_key(device)))
    return entry


def cuda_mmcv_ops() -> str:
    """``''`` where mmcv's ops run on CUDA, else why not."""
    if not torch.cuda.is_available():
        return 'no CUDA device'
    try:
        from mmcv.ops import nms
        boxes = torch.tensor([[0., 0., 2., 2.], [0., 0., 2., 2.1]],
                             device='cuda')
        nms(boxes, torch.tensor([0.9, 0.8], device='cuda'), 0.5)
    except Exception as exc:  # an ImportError, or ops built without CUDA
        return f'mmcv.ops on CUDA: {type(exc).__name__}: {exc}'[:300]
    return ''


def mini_mask_rcnn(timeout: float) -> dict:
    """4 training iterations (and one validation) of the mini Mask R-CNN
    on mini-COCO through ``tools/train.py`` (the Runner picks the GPU)."""
    from mmpos_harness.mini_data import make_all
    work = tempfile.mkdtemp(prefix='gpu_check_maskrcnn_')
    root = make_all(osp.join(work, 'data'), ('coco', ), num_train=8,
                    num_val=4, img_size=128)['coco'].rstrip('/') + '/'
    ann = f'{root}annotations/instances_val2017.json'
    options = [f'{s}_dataloader.dataset.data_root={root}'
               for s in ('train', 'val', 'test')]
    options += [f'val_evaluator.ann_file={ann}',
                f'test_evaluator.ann_file={ann}', 'train_cfg.max_iters=4',
                'train_cfg.val_interval=4', 'param_scheduler.0.end=2']
    cmd = [sys.executable, 'tools/train.py', MASK_RCNN, '--work-dir',
           osp.join(work, 'run'), '--quiet', '--cfg-options', *options]
    t0 = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(config=MASK_RCNN, status=f'timed out after {timeout:.0f}'
                    ' s')
    return dict(config=MASK_RCNN, returncode=done.returncode,
                status='ran' if done.returncode == 0 else 'failed',
                wall_s=time.perf_counter() - t0,
                output_tail=(done.stdout + done.stderr)[-1500:])


def provenance(command: str, dry_run: bool) -> dict:
    """``mmpos_harness.provenance.record`` where it can be (module
    docstring), else the minimal record."""
    why = 'dry run' if dry_run else ''
    if not why:
        try:
            from mmpos_harness import provenance as harness
            if harness.has_git():
                return dict(harness.record(
                    command, ['benchmarks/gpu_check.py',
                              'mmpos/analysis/plan.py',
                              *sorted({c[0] for c in CASES.values()}),
                              MASK_RCNN]), kind='harness')
            why = 'no git'
        except Exception as exc:
            why = f'harness record failed: {type(exc).__name__}: {exc}'
    cuda = torch.cuda.is_available()
    return dict(
        kind='minimal', why=why, command=command, torch=torch.__version__,
        cuda=torch.version.cuda,
        gpu=torch.cuda.get_device_name() if cuda else None,
        python=platform.python_version(), machine=platform.node(),
        date=datetime.datetime.now(datetime.timezone.utc).strftime(
            '%Y-%m-%d %H:%M UTC'))


def _mib(value):
    return '-' if value is None else f'{value / 2**20:.1f}'


def _num(value, fmt):
    return '-' if value is None else format(value, fmt)


def markdown(report: dict) -> str:
    s = report['settings']
    lines = [
        f"# GPU check: {s['device']}", '',
        f"torch {s['torch']}, CUDA {s['cuda']}, {s['iters']} timed steps "
        f"after {s['warmup']}{', dry run' if s['dry_run'] else ''}; "
        f"provenance: {report['provenance']['kind']}.", '',
        '| case | batch (asked) | measured MiB | planned MiB | planned / '
        'measured | step s | planned step s (MFU assumed) | TFLOP/s | MFU |',
        '|---|---|---|---|---|---|---|---|---|']
    for name, c in report['cases'].items():
        if 'error' in c:
            lines.append(f'| {name} | - | {c["error"]} | | | | | | |')
            continue
        lines.append(
            f"| {name} | {c.get('batch')} ({c.get('batch_asked')}) "
            f"| {_mib(c.get('peak_bytes'))} "
            f"| {_mib(c.get('planned_peak_bytes'))} "
            f"| {_num(c.get('mem_ratio'), '.3f')} "
            f"| {_num(c.get('step_s'), '.3f')} "
            f"| {_num(c.get('planned_step_s'), '.3f')} "
            f"| {_num(c.get('achieved_tflops'), '.1f')} "
            f"| {_num(c.get('mfu'), '.3f')} |")
    m = report['mask_rcnn']
    lines += ['', f"Mini Mask R-CNN ({MASK_RCNN}): {m['status']}"
              + (f", {m['wall_s']:.0f} s" if 'wall_s' in m else '') + '.']
    return '\n'.join(lines) + '\n'


def run(out=None, batch=None, cases=tuple(CASES), iters=None, warmup=None,
        budget=330., mask_rcnn='auto', dry_run=False, argv=()) -> dict:
    start = time.perf_counter()
    device = torch.device('cpu') if dry_run else _timing.resolve_device()
    if dry_run:
        batch, iters, warmup = 1, 1, 0
    iters = iters or 10
    warmup = 3 if warmup is None else warmup
    command = ' '.join(['python benchmarks/gpu_check.py', *argv])
    report = dict(
        settings=dict(
            device=(torch.cuda.get_device_name(device)
                    if device.type == 'cuda' else 'cpu'),
            torch=torch.__version__, cuda=torch.version.cuda,
            dry_run=dry_run, iters=iters, warmup=warmup, batch=batch,
            budget_s=budget, threads=torch.get_num_threads(),
            float32_matmul_precision=torch.get_float32_matmul_precision(),
            argv=list(argv)),
        provenance=provenance(command, dry_run), cases={},
        mask_rcnn=dict(status='not run'))
    paths = None
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        stem = Path(out) / f'{device_slug(device)}_gpu_check'
        paths = stem.with_suffix('.json'), stem.with_suffix('.md')

    def save():
        report['settings']['total_s'] = time.perf_counter() - start
        if paths:
            _write(paths[0], json.dumps(report, indent=2) + '\n')
            _write(paths[1], markdown(report))

    for name in cases:
        if time.perf_counter() - start > budget:
            report['cases'][name] = dict(config=CASES[name][0],
                                         error=f'skipped: budget {budget:g} s'
                                         ' spent')
            continue
        try:
            report['cases'][name] = run_case(name, batch, device, warmup,
                                             iters, dry_run)
        except Exception as exc:
            traceback.print_exc()
            report['cases'][name] = dict(config=CASES[name][0],
                                         error=f'{type(exc).__name__}: {exc}'
                                         [:500])
        _free(device)
        save()
        c = report['cases'][name]
        error = f" {c['error']}" if 'error' in c else ''
        print(f"[gpu_check] {name}: batch {c.get('batch')}, measured "
              f"{_mib(c.get('peak_bytes'))} MiB, planned "
              f"{_mib(c.get('planned_peak_bytes'))} MiB (ratio "
              f"{_num(c.get('mem_ratio'), '.3f')}), step "
              f"{_num(c.get('step_s'), '.3f')} s, MFU "
              f"{_num(c.get('mfu'), '.3f')}{error}"
              f" ({time.perf_counter() - start:.0f} s)", flush=True)
    why = 'off' if mask_rcnn == 'off' else cuda_mmcv_ops()
    left = budget - (time.perf_counter() - start)
    if why:
        report['mask_rcnn'] = dict(status=f'skipped: {why}')
    elif left < 60:
        report['mask_rcnn'] = dict(status='skipped: budget spent')
    else:
        report['mask_rcnn'] = mini_mask_rcnn(left)
    print(f"[gpu_check] mini Mask R-CNN: {report['mask_rcnn']['status']}",
          flush=True)
    save()
    return report


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--out', help='write <device>_gpu_check.json / .md')
    parser.add_argument('--batch', type=int,
                        help="images per GPU for every case (default: each "
                        "config's train batch size)")
    parser.add_argument('--cases', nargs='+', choices=list(CASES),
                        default=list(CASES))
    parser.add_argument('--iters', type=int, help='timed steps (10)')
    parser.add_argument('--warmup', type=int, help='untimed steps (3)')
    parser.add_argument('--budget', type=float, default=330.,
                        help='seconds after which no case starts')
    parser.add_argument('--mask-rcnn', choices=('auto', 'off'),
                        default='auto',
                        help="'auto': where mmcv's CUDA ops run")
    parser.add_argument('--dry-run', action='store_true',
                        help='CPU, batch 1, one timed step, tiny sizes')
    args = parser.parse_args(argv)
    if args.batch is not None and args.batch < 1:
        parser.error(f'--batch must be >= 1, got {args.batch}')
    report = run(argv=argv, **vars(args))
    return report


if __name__ == '__main__':
    main()
