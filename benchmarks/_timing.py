"""Shared measurement for the scripts in ``benchmarks/``.

Needs only torch and :mod:`mmpos_stats` (numpy, scipy):
``rope_attention_device.py`` runs where the OpenMMLab stack is absent; the
scripts import it as a sibling module, so each runs standalone as ``python
benchmarks/<script>.py``.

* **Steps.** :func:`train_step` wraps a loss closure into one training step:
  loss (under autocast when an AMP dtype is given; dict losses are summed
  over the keys containing ``'loss'``, as mmengine's ``parse_losses``) ->
  backward -> AdamW step (fp16 through a ``GradScaler``) -> ``zero_grad``
  (``set_to_none``, so gradients live only inside a step). Any other
  zero-argument callable can be timed as well (forward-only, a data
  pipeline).
* **Time.** :func:`measure` runs ``warmup`` calls of every step, then
  ``iters`` *interleaved* rounds (one call of each step per round) so that
  drifts of a shared machine's load hit all alike, and reports the median
  and every round's time. On CUDA the device is synchronised before and
  after each timed call.
* **Ratios** (:func:`ratio`): one round holds one call of each step, so
  the rounds pair the steps. A ratio ours / baseline is the geometric mean
  of the per-round ratios with its 95 % interval, the paired t test on the
  per-round log times (``mmpos_stats.paired``: numpy and scipy, not the
  OpenMMLab stack); fewer than 2 rounds give no interval. A row whose target bounds the time (``'<= x'``,
  ``'time < x'``, :func:`time_bound`) carries the test of its log ratio
  against ``log x`` (``target_test``); ``run.py`` adjusts a run's target
  tests together (Holm) and reads the verdict: ``met`` (the ratio is below
  the bound), ``missed`` (above) or ``no verdict``.
* **Memory reuse** (:func:`use_malloc`, ``--malloc``): ``reuse`` (the
  scripts' default) makes glibc keep what torch frees and serve tensors up
  to 32 MiB from that heap, so a step reuses the memory of the previous
  one, as a caching allocator does (PyTorch's CPU tuning guide: jemalloc /
  tcmalloc; CUDA's caching allocator). ``system`` leaves glibc's defaults:
  it returns freed memory to the OS and maps tensors above a threshold
  that moves with the process's history afresh, so a step pays page
  faults that depend on what the process allocated before. With ``reuse``
  the heap grows during the first calls until a step fits in what earlier
  steps freed (warm-up), then a step faults no pages for its tensors up to
  32 MiB; larger ones are mapped each time in both modes.
  The mode is recorded in the settings and every timed call's minor page
  faults in ``faults`` (median per step).
* **Peak memory** (:func:`peak_memory`), one extra call per step: on CUDA
  ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``,
  minus what was allocated before the call; on CPU the allocator events of
  ``torch.profiler`` (``profile_memory=True``): the maximum running sum of
  every allocation and free during the call. Both are the highest memory
  the call *adds* on top of what exists before it (parameters, optimizer
  state and inputs are not counted; activations, gradients and temporaries
  are). CPU numbers are allocator-level torch tensors only: not RSS
  (unaffected by the C library's caching) and blind to numpy / PIL memory,
  which is why the data-pipeline benchmark reports none.
* **Scripts.** :func:`compare_train_steps` is the whole measurement of
  ``cr2pq_step`` / ``droppos_step`` / ``icpf_step`` (models against a
  baseline on one batch); :func:`run_cli` the scripts' command line.
"""
import argparse
import contextlib
import ctypes
import math
import os
import re
import statistics
import time
from typing import Callable, Dict, Optional, Sequence, Tuple

import torch
from torch.profiler import ProfilerActivity, profile

import mmpos_stats

try:
    import resource
except ImportError:  # not on Windows: no page-fault counts
    resource = None

AMP_CHOICES = ('auto', 'off', 'bf16', 'fp16')
MALLOC_CHOICES = ('reuse', 'system')
# glibc's mallopt parameters and what :func:`use_malloc` sets them to: keep
# up to 1 GiB of freed heap; tensors up to 32 MiB (glibc's largest dynamic
# mmap threshold) from the heap, larger ones mapped (and unmapped) each time
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
REUSE = {M_TRIM_THRESHOLD: 1 << 30, M_MMAP_THRESHOLD: 32 << 20}
# the mode :func:`use_malloc` set in this process (recorded by settings)
_malloc = 'system'
# ``(flag, add_argument kwargs)`` for :func:`run_cli`.
BATCH_SIZE = ('--batch-size', dict(type=int))


def resolve_device(device: str = 'auto') -> torch.device:
    """``'auto'``: CUDA when available, else CPU; otherwise ``device``."""
    if device == 'auto':
        device = 'cuda' if torch.cuda.is_available() else 'cpu'
    device = torch.device(device)
    if device.type == 'cuda' and not torch.cuda.is_available():
        raise ValueError(f'device {device}: CUDA is not available here')
    return device


def resolve_amp(amp: str, device: torch.device) -> Optional[torch.dtype]:
    """Autocast dtype: ``'auto'`` is bf16 on CUDA (fp16 where bf16 is
    unsupported) and none (fp32) on CPU; ``'off'`` is none."""
    if amp not in AMP_CHOICES:
        raise ValueError(f'amp must be one of {AMP_CHOICES}, got {amp!r}')
    if amp == 'auto':
        if device.type != 'cuda':
            return None
        return (torch.bfloat16
                if torch.cuda.is_bf16_supported() else torch.float16)
    return dict(off=None, bf16=torch.bfloat16, fp16=torch.float16)[amp]


def setup(device: str = 'auto', amp: str = 'auto',
          threads: Optional[int] = None):
    """``(torch.device, autocast dtype or None)``; sets the thread count."""
    if threads:
        torch.set_num_threads(threads)
    device = resolve_device(device)
    return device, resolve_amp(amp, device)


def use_malloc(mode: str) -> None:
    """Set this process's C allocator (see the module docstring):
    ``'reuse'``: glibc's ``mallopt`` with ``M_TRIM_THRESHOLD`` at 1 GiB
    (freed heap memory stays with the process) and ``M_MMAP_THRESHOLD``
    fixed at 32 MiB, the largest value glibc's own threshold moves to
    (tensors up to it come from the heap, larger ones get their own
    mapping as before, so a step that needs many GiB does not pile them up
    in a fragmented heap); for the rest of the process. ``'system'``:
    nothing changed (a process set to ``reuse`` stays so)."""
    global _malloc
    if mode not in MALLOC_CHOICES:
        raise ValueError(f'--malloc must be one of {MALLOC_CHOICES}, got '
                         f'{mode!r}')
    if mode == 'system':
        return
    mallopt = getattr(ctypes.CDLL(None), 'mallopt', None)
    if mallopt is None:
        raise ValueError("--malloc reuse needs glibc's mallopt, which this "
                         "C library lacks; pass --malloc system")
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    for option, value in REUSE.items():
        if mallopt(option, value) != 1:
            raise ValueError(f'--malloc reuse: mallopt({option}, {value}) '
                             'was refused; pass --malloc system')
    _malloc = mode


def parse_args(parser, argv=None) -> argparse.Namespace:
    """``parser.parse_args(argv)`` of a parser with :func:`add_common_args`,
    applying ``--malloc`` (:func:`use_malloc`) and removing it from the
    result."""
    args = parser.parse_args(argv)
    try:
        use_malloc(args.malloc)
    except ValueError as exc:
        parser.error(str(exc))
    del args.malloc
    return args


def autocast(device: torch.device, dtype: Optional[torch.dtype]):
    """``torch.autocast`` for ``dtype``, a no-op context for ``None``."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


def synchronize(device: torch.device) -> None:
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def sum_losses(losses) -> torch.Tensor:
    """A loss tensor, or the sum of the ``'loss'`` entries of a dict (list
    values summed too)."""
    if isinstance(losses, torch.Tensor):
        return losses
    total = 0.
    for key, value in losses.items():
        if 'loss' in key:
            if isinstance(value, (list, tuple)):
                value = sum(value)
            total = total + value
    return total


def train_step(model: torch.nn.Module,
               loss_fn: Callable,
               device: torch.device,
               amp: Optional[torch.dtype] = None,
               lr: float = 1e-4) -> Callable[[], None]:
    """One AdamW training step of ``model`` (trainable parameters only) on
    the loss returned by ``loss_fn()`` (tensor or dict), followed by the
    update of the model's EMA teachers (``ema_teachers()``: DINOv2, ICPF,
    CR2PQ), which training runs in ``EMATeacherHook``; the teachers are
    copied from their students here, as before training."""
    from mmpos.models.utils import update_ema
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad], lr=lr)
    teachers = model.ema_teachers() if hasattr(model, 'ema_teachers') \
        else []
    for ema, source in teachers:
        if int(ema.steps) == 0:
            update_ema(ema, source)
    scaler = (torch.amp.GradScaler(device.type)
              if amp == torch.float16 else None)

    def step():
        with autocast(device, amp):
            loss = sum_losses(loss_fn())
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        # Release the gradients here rather than before the next forward:
        # same work per step, and no step starts with the previous step's
        # gradients allocated (whose release the CPU profiler cannot see).
        optimizer.zero_grad(set_to_none=True)
        for ema, source in teachers:
            update_ema(ema, source)

    return step


def peak_memory(step: Callable[[], None], device: torch.device) -> int:
    """Peak bytes allocated during one ``step()`` above what existed before
    (see the module docstring for how, per device)."""
    if device.type == 'cuda':
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        step()
        synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    with profile(activities=[ProfilerActivity.CPU],
                 profile_memory=True) as prof:
        step()
    events = sorted((e.start_ns(), e.nbytes())
                    for e in prof.profiler.kineto_results.events()
                    if e.name() == '[memory]')
    total = peak = 0
    for _, nbytes in events:
        total += nbytes
        peak = max(peak, total)
    return peak


def minor_faults() -> Optional[int]:
    """This process's minor page faults so far (None without
    ``resource``)."""
    if resource is None:
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def time_steps(steps: Dict[str, Callable[[], None]], device: torch.device,
               warmup: int, iters: int) -> Tuple[dict, dict]:
    """Seconds and minor page faults (:func:`minor_faults`; None where
    not counted) of each of ``iters`` interleaved calls per step, after
    ``warmup`` calls of each."""
    for step in steps.values():
        for _ in range(warmup):
            step()
    times = {name: [] for name in steps}
    faults = {name: [] for name in steps}
    for _ in range(iters):
        for name, step in steps.items():
            synchronize(device)
            before, start = minor_faults(), time.perf_counter()
            step()
            synchronize(device)
            times[name].append(time.perf_counter() - start)
            after = minor_faults()
            faults[name].append(None if after is None else after - before)
    return times, faults


def measure(steps: Dict[str, Callable[[], None]],
            device: torch.device,
            warmup: int,
            iters: int,
            batch_size: Optional[int] = None,
            memory: bool = True) -> Dict[str, dict]:
    """``{name: {step_ms, times_ms, [faults], [peak_mib],
    [images_per_s]}}``: median time of the interleaved calls, the time of
    every round and the median minor page faults of a call
    (:func:`time_steps`), the peak memory of one more call
    (:func:`peak_memory`) and ``batch_size`` / median seconds."""
    times, faults = time_steps(steps, device, warmup, iters)
    stats = {}
    for name, step in steps.items():
        seconds = statistics.median(times[name])
        stats[name] = dict(step_ms=1e3 * seconds,
                           times_ms=[1e3 * t for t in times[name]])
        if None not in faults[name]:
            stats[name]['faults'] = statistics.median(faults[name])
        if memory:
            stats[name]['peak_mib'] = peak_memory(step, device) / 2**20
        if batch_size:
            stats[name]['images_per_s'] = batch_size / seconds
    return stats


def _log_times(stats: dict, what: str) -> list:
    if 'times_ms' not in stats:
        raise ValueError(f'{what}: an entry without per-round times '
                         '(times_ms); measure it with _timing.measure')
    return [math.log(t) for t in stats['times_ms']]


def log_ratios(ours: dict, base: dict,
               names: Tuple[str, str] = ('ours', 'baseline')) -> list:
    """The per-round ``log(ours / base)`` of two :func:`measure` entries of
    one run (called ``names`` in errors)."""
    return [a - b for a, b in zip(_log_times(ours, names[0]),
                                  _log_times(base, names[1]))]


def ratio_of_logs(logs: Sequence[float], key: str = 'time_ratio',
                  target: Optional[str] = None) -> dict:
    """From replicate log ratios (a run's rounds, or the runs of one
    command): ``{key: r, key_low, key_high}``, ``r`` their geometric mean
    and ``[key_low, key_high]`` its 95 % interval ``exp(D -+ t SE)`` of the
    one-sample t (None with fewer than 2 replicates or equal ratios); with
    a ``target`` that bounds the time (:func:`time_bound`),
    ``target_test``: the one-sample t of the log ratios against the log
    bound (a ``mmpos_stats.Comparison`` as a dict, adjusted by
    ``run.py``)."""
    test = mmpos_stats.paired(logs, [0.] * len(logs))
    out = {key: math.exp(test.difference),
           f'{key}_low': None if test.low is None else math.exp(test.low),
           f'{key}_high': None if test.high is None else math.exp(test.high)}
    bound = time_bound(target)
    if bound is not None:
        out['target_test'] = mmpos_stats.paired(
            logs, [math.log(bound)] * len(logs)).asdict()
    return out


def ratio(ours: dict, base: dict, key: str = 'time_ratio',
          names: Tuple[str, str] = ('ours', 'baseline')) -> dict:
    """``ours`` / ``base`` (:func:`measure` entries of one run, called
    ``names`` in errors) by :func:`ratio_of_logs` over the rounds."""
    return ratio_of_logs(log_ratios(ours, base, names), key)


def add_ratios(stats: Dict[str, dict], base: str) -> None:
    """Add :func:`ratio`'s ``time_ratio`` (with its interval) and
    ``mem_ratio`` against ``stats[base]`` to every entry of ``stats`` (1
    for ``base``)."""
    ref = dict(stats[base])
    for name, entry in stats.items():
        entry.update(ratio(entry, ref, names=(name, base)))
        if 'peak_mib' in entry and ref.get('peak_mib'):
            entry['mem_ratio'] = entry['peak_mib'] / ref['peak_mib']


def format_ratio(stats: dict, key: str = 'time_ratio') -> str:
    """``'1.234 [1.200, 1.270]'``: :func:`ratio`'s value and interval
    (``[-]``: none)."""
    low, high = stats.get(f'{key}_low'), stats.get(f'{key}_high')
    span = '[-]' if low is None else f'[{low:.3f}, {high:.3f}]'
    return f'{stats[key]:.3f} {span}'


def time_bound(target: Optional[str]) -> Optional[float]:
    """The bound a target sets on the time ratio: ``x`` of ``'<= x'`` /
    ``'< x'`` at its start or of ``'time <= x'`` / ``'time < x'``; None
    for other targets (``'~0.25'``, ``'1.3 (paper)'``)."""
    found = re.search(r'(?:^|\btime\s*)<=?\s*(\d+(?:\.\d+)?)', target or '')
    return float(found.group(1)) if found else None


def load() -> list:
    """The machine's load averages over 1, 5 and 15 minutes, recorded
    before and after a measurement."""
    return [round(x, 2) for x in os.getloadavg()]


def settings(device: torch.device, amp: Optional[torch.dtype],
             **extra) -> dict:
    """Run settings recorded next to the numbers."""
    return dict(
        extra,
        device=(torch.cuda.get_device_name(device)
                if device.type == 'cuda' else 'cpu'),
        amp=str(amp).replace('torch.', '') if amp else 'off (fp32)',
        threads=torch.get_num_threads(),
        malloc=_malloc,
        torch=torch.__version__)


def compare_train_steps(models: Dict[str, torch.nn.Module],
                        inputs: Sequence,
                        base: str,
                        device: torch.device,
                        amp: Optional[torch.dtype],
                        quick: bool,
                        iters: Optional[int],
                        warmup: Optional[int],
                        batch_size: int,
                        **extra) -> Dict[str, dict]:
    """:func:`measure` one :func:`train_step` of each model (moved to
    ``device``) on ``model.loss(*inputs)``, with :func:`add_ratios` against
    ``models[base]`` and the run's :func:`settings` under ``'settings'``
    (``extra`` recorded too). ``iters`` defaults to 3 (``quick``) / 10,
    ``warmup`` to 1 / 2."""
    iters = iters or (3 if quick else 10)
    warmup = warmup if warmup is not None else (1 if quick else 2)
    steps = {
        name: train_step(model.to(device),
                         lambda m=model: m.loss(*inputs), device, amp)
        for name, model in models.items()
    }
    result = measure(steps, device, warmup, iters, batch_size)
    add_ratios(result, base)
    result['settings'] = settings(
        device, amp, quick=quick, iters=iters, warmup=warmup,
        batch_size=batch_size, **extra)
    return result


def comparison(benchmark: str, ours: str, ours_stats: dict, baseline: str,
               base_stats: dict, target: Optional[str] = None,
               **extra) -> dict:
    """One summary row: ours against a baseline measured in the same run,
    ``time_ratio`` = ours / baseline with its interval (:func:`ratio`;
    below 1: ours is faster), ``mem_ratio`` and ``throughput_ratio`` (above
    1: ours is faster) of the medians and peaks, and both median page
    faults per call (``ours_faults``, ``baseline_faults``). A ``target``
    that bounds the time adds ``target_test`` (:func:`ratio_of_logs`)."""
    row = dict(benchmark=benchmark, ours=ours, baseline=baseline,
               ours_ms=ours_stats['step_ms'],
               baseline_ms=base_stats['step_ms'])
    if target is not None:
        row['target'] = target
    row.update(ratio_of_logs(
        log_ratios(ours_stats, base_stats, (ours, baseline)), target=target))
    if 'peak_mib' in ours_stats and 'peak_mib' in base_stats:
        row.update(ours_peak_mib=ours_stats['peak_mib'],
                   baseline_peak_mib=base_stats['peak_mib'])
        if base_stats['peak_mib'] > 0:
            row['mem_ratio'] = ours_stats['peak_mib'] / base_stats['peak_mib']
    if 'faults' in ours_stats and 'faults' in base_stats:
        row.update(ours_faults=ours_stats['faults'],
                   baseline_faults=base_stats['faults'])
    if 'images_per_s' in ours_stats and 'images_per_s' in base_stats:
        row.update(ours_images_per_s=ours_stats['images_per_s'],
                   baseline_images_per_s=base_stats['images_per_s'],
                   throughput_ratio=ours_stats['images_per_s'] /
                   base_stats['images_per_s'])
    row.update(extra)
    return row


def add_common_args(parser) -> None:
    """``--iters --warmup --threads --device --amp --malloc`` of every
    script (parse with :func:`parse_args`)."""
    parser.add_argument('--iters', type=int, help='timed rounds')
    parser.add_argument('--warmup', type=int, help='untimed calls per step')
    parser.add_argument('--threads', type=int,
                        help='torch.set_num_threads (default: torch default)')
    parser.add_argument('--device', default='auto',
                        help="'auto' (CUDA when available), 'cpu', 'cuda'")
    parser.add_argument('--amp', default='auto', choices=AMP_CHOICES,
                        help="autocast dtype; 'auto': bf16/fp16 on CUDA, "
                        'fp32 on CPU')
    parser.add_argument('--malloc', default='reuse', choices=MALLOC_CHOICES,
                        help="C allocator: 'reuse' keeps freed memory for "
                        "the next step, 'system' glibc's defaults (see "
                        '_timing.use_malloc)')


def run_cli(doc: str, run: Callable[..., dict],
            *options: Tuple[str, dict]) -> dict:
    """Command line of a script: ``--quick``, its ``options`` (``(flag,
    add_argument kwargs)``, e.g. :data:`BATCH_SIZE`) and
    :func:`add_common_args`; returns ``run(**args)`` (option names are
    ``run``'s parameter names) after printing its ``'settings'``."""
    parser = argparse.ArgumentParser(description=doc.split('\n')[0])
    parser.add_argument('--quick', action='store_true')
    for flag, kwargs in options:
        parser.add_argument(flag, **kwargs)
    add_common_args(parser)
    result = run(**vars(parse_args(parser)))
    print('settings:', result['settings'])
    return result


def step_line(name: str, stats: dict, width: int) -> str:
    """``name`` (padded to ``width``), ms per step and peak MiB."""
    return (f"{name:<{width}}{stats['step_ms']:>10.1f} ms/step"
            f"{stats['peak_mib']:>9.1f} MiB")
