"""The gaps mmengine's Runner leaves, filled for ``tools/train.py`` and
``tools/test.py`` (through :func:`mmpos.guardrails.prepare`) by small named
functions:

* :func:`add_launch_arguments`, :func:`apply_launch_arguments`: the
  options both tools share, the default work dir ``work_dirs/<config>``;
* :func:`load_config`: a config file read with one-line errors and its
  misspelled keys refused (:mod:`mmpos.guardrails.config_check`);
* :func:`work_dir_lock`: one run per work dir, and what a failed run wrote
  removed again (only that);
* :func:`check_work_dir`, :func:`resume_checkpoint`: a fresh run never
  overwrites another one's checkpoints; ``--resume`` takes the newest
  intact checkpoint;
* :func:`check_checkpoint_paths`: missing or unreadable checkpoints refused
  before anything is built;
* :func:`use_safe_image_loading`: images that cannot be read named (or
  skipped in training);
* :func:`start_cpu_process_group`: distributed runs on CPU-only machines,
  where mmengine's own ``init_dist`` calls ``torch.cuda.set_device``;
* :func:`quiet_console`: no line per parameter on the console;
* :func:`rank_processes`, :func:`lost_rank`: a rank that dies is named by
  the ranks it leaves behind, in one line.
"""
import contextlib
import fcntl
import logging
import os
import os.path as osp
import re
import shutil
import socket
import subprocess
import sys
import time

import torch
import torch.distributed as torch_dist
from mmengine.config import Config, DictAction

from mmpos.checkpoint.read import check_checkpoint_file, checkpoint_problem
from mmpos.errors import LaunchError
from .config_check import (config_dicts, config_key_problems, new_option_keys,
                           type_switch_problem)


def global_rank() -> int:
    """This process' rank before any process group exists: ``RANK``
    (torchrun) or ``SLURM_PROCID`` (srun), else 0."""
    return int(os.environ.get('RANK', os.environ.get('SLURM_PROCID', 0)))


def add_launch_arguments(parser) -> None:
    """``--skip-data-check``, ``--quiet``, ``--cfg-options``, ``--launcher``
    and ``--local-rank`` (which ``torch.distributed.launch`` passes;
    torchrun sets ``LOCAL_RANK``)."""
    parser.add_argument(
        '--skip-data-check',
        action='store_true',
        help='do not check the datasets the run reads before starting (their '
        'annotation files and a fixed sample of 32 label maps each; '
        'tools/misc/validate_dataset.py checks every entry)')
    parser.add_argument(
        '--quiet',
        action='store_true',
        help="leave mmengine's environment, config and hook dumps off the "
        'console and the log (the config is still written to the work '
        'dir); the loss and metric lines remain')
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override config entries, e.g. train_cfg.max_iters=100')
    parser.add_argument(
        '--launcher',
        choices=['none', 'pytorch', 'slurm'],
        default='none',
        help='job launcher')
    parser.add_argument('--local-rank', '--local_rank', type=int, default=0)


def apply_launch_arguments(cfg, args) -> None:
    """``cfg.launcher``, ``LOCAL_RANK`` and ``cfg.work_dir``: ``--work-dir``
    > the config's ``work_dir`` > ``work_dirs/<config file name>``."""
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    cfg.launcher = args.launcher
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir') is None:
        name = osp.splitext(osp.basename(args.config))[0]
        cfg.work_dir = osp.join('work_dirs', name)


def load_config(path, cfg_options=None):
    """Read a config file and merge ``--cfg-options`` into it.

    Raises:
        LaunchError: when the file is missing or cannot be parsed, or has
            misspelled keys (:mod:`mmpos.guardrails.config_check`).
    """
    if not osp.isfile(path):
        raise LaunchError(f'config file not found: {path}')
    try:
        cfg = Config.fromfile(path)
    except Exception as err:  # mmengine raises many types for bad configs
        raise LaunchError(f'cannot read config {path}: '
                          f'{type(err).__name__}: {err}') from err
    new_keys = new_option_keys(cfg, cfg_options) if cfg_options else []
    if cfg_options:
        switch = type_switch_problem(cfg, cfg_options)
        if switch:
            raise LaunchError(f'{path}: {switch}')
        cfg.merge_from_dict(cfg_options)
    problems = config_key_problems(cfg, cfg_options, new_keys)
    if problems:
        raise LaunchError(f'{path}: ' + '; '.join(problems))
    drop_disabled_hooks(cfg)
    return cfg


# mmengine 0.10 registers these unless `default_hooks.<name>=None`.
MMENGINE_DEFAULT_HOOKS = ('runtime_info', 'timer', 'sampler_seed', 'logger',
                          'param_scheduler', 'checkpoint')


def drop_disabled_hooks(cfg):
    """Make ``default_hooks.<name>=None`` switch any hook off (e.g.
    ``check_loss``, ``rng_state``): mmengine 0.10 accepts ``None`` only for
    its own default hooks and fails with a bare AssertionError otherwise."""
    hooks = cfg.get('default_hooks') or {}
    for name in [k for k, v in hooks.items()
                 if v is None and k not in MMENGINE_DEFAULT_HOOKS]:
        del hooks[name]


def check_work_dir(work_dir, fresh_training=False):
    """Refuse a work dir that a running run holds (:func:`work_dir_lock`),
    and (``fresh_training``) a fresh training on top of another run's
    checkpoints.

    mmengine names checkpoints ``iter_N.pth``/``epoch_N.pth``, so a second
    fresh run in the same work dir would silently overwrite the first one's.
    """
    with work_dir_lock(work_dir, create=False):
        pass
    marker = osp.join(work_dir, 'last_checkpoint')
    if not fresh_training or not osp.isfile(marker):
        return
    with open(marker) as f:
        last = f.read().strip()
    raise LaunchError(
        f'work dir {work_dir} already holds checkpoints (last: {last}); '
        'pass --resume to continue that run or choose another --work-dir')


LOCK_FILE = '.mmpos_run.lock'


@contextlib.contextmanager
def work_dir_lock(work_dir, create=True, keep_output=lambda: False,
                  option='--work-dir'):
    """Hold ``work_dir``'s lock while a run (training or test) writes into it.

    The lock is an ``flock`` on ``<work_dir>/.mmpos_run.lock``, which holds
    the PID, host, start time and command line of its owner; a second run
    on the same work dir is refused with :class:`LaunchError` naming them.
    The kernel drops the lock when its process ends, so a crashed or
    killed run never leaves a stuck lock (flock is local to a machine:
    runs on two hosts sharing a network file system are not excluded).
    Only rank 0 locks; the file is removed when the block ends.

    When the block fails and ``keep_output()`` is false (e.g. nothing was
    trained), what the block added to ``work_dir`` is removed: the entries
    that appeared while the lock was held (so written by this run), or the
    whole work dir if this call created it. Nothing that was there before
    is touched.

    Args:
        create: create the work dir (and the lock file) if missing;
            ``False`` only checks that no run holds an existing lock.
        keep_output: called after a failure; true keeps the new entries.
        option: the command-line option that names ``work_dir``, for the
            refusal's advice.

    Yields:
        bool: whether the work dir existed before.
    """
    existed = osp.isdir(work_dir)
    path = osp.join(work_dir, LOCK_FILE)
    if global_rank() != 0 or not (create or osp.isfile(path)):
        yield existed
        return
    os.makedirs(work_dir, exist_ok=True)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            with os.fdopen(fd) as f:
                owner = ' '.join(f.read().split()) or 'unknown'
            raise LaunchError(
                f'work dir {work_dir} is in use by another run ({owner}; '
                f'lock {path}); wait for it to end or choose another '
                f'{option}') from None
        try:  # the owner may have removed the file while we opened it
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    before = set(os.listdir(work_dir)) if existed else set()
    try:
        if create:
            owner = (f'pid {os.getpid()} on {socket.gethostname()}, started '
                     f'{time.strftime("%Y-%m-%d %H:%M:%S")}: '
                     f'{" ".join(sys.argv)}')
            os.ftruncate(fd, 0)
            os.write(fd, owner.encode())
        yield existed
    except BaseException:
        if create and not keep_output():
            _remove_new_entries(work_dir, before | {LOCK_FILE})
        raise
    finally:
        if create and osp.isfile(path) and \
                os.stat(path).st_ino == os.fstat(fd).st_ino:
            os.remove(path)
        os.close(fd)
        if create and not existed and not os.listdir(work_dir):
            os.rmdir(work_dir)


def _remove_new_entries(work_dir, before):
    for name in set(os.listdir(work_dir)) - before:
        path = osp.join(work_dir, name)
        if osp.isdir(path) and not osp.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.remove(path)


def saved_checkpoints(folder):
    """``iter_N.pth`` / ``epoch_N.pth`` in ``folder``, newest (largest N)
    first."""
    found = []
    for name in os.listdir(folder) if osp.isdir(folder) else []:
        match = re.fullmatch(r'(?:iter|epoch)_(\d+)\.pth', name)
        if match:
            found.append((int(match.group(1)), osp.join(folder, name)))
    return [path for _, path in sorted(found, reverse=True)]


def resume_checkpoint(work_dir):
    """The checkpoint ``--resume`` without a value continues from: the one
    ``<work_dir>/last_checkpoint`` names (``None`` without that file).

    Raises:
        LaunchError: when that checkpoint cannot be read
            (:func:`~mmpos.checkpoint.read.checkpoint_problem`), naming
            it and the newest intact checkpoint beside it.
    """
    marker = osp.join(work_dir, 'last_checkpoint')
    if not osp.isfile(marker):
        return None
    with open(marker) as f:
        latest = f.read().strip()
    problem = checkpoint_problem(latest) if latest else \
        f'{marker} is empty'
    if problem is None:
        return latest
    folder = osp.dirname(latest) if latest else work_dir
    intact = [p for p in saved_checkpoints(folder)
              if p != latest and checkpoint_problem(p) is None]
    hint = (f'the newest intact one is {intact[0]}: pass --resume '
            f'{intact[0]}' if intact else f'no intact checkpoint in {folder}')
    raise LaunchError(f'--resume: the newest checkpoint {latest or "?"} '
                      f'cannot be read ({problem}); {hint}')


def _is_local(path) -> bool:
    return isinstance(path, str) and '://' not in path


def check_checkpoint_paths(cfg, load_from_what='load_from checkpoint'):
    """Refuse local checkpoints that do not exist or are no complete
    checkpoint files (:func:`~mmpos.checkpoint.read.checkpoint_problem`)
    before anything is built: ``load_from`` (named ``load_from_what``) and
    every ``init_cfg=dict(type='Pretrained', ...)`` (mmengine would fail
    after creating the work dir, or, for a Pretrained init of a module that
    is not mmpos', warn and train from random)."""
    load_from = cfg.get('load_from')
    if _is_local(load_from):
        _check_checkpoint(load_from, load_from_what)
    for where, init in config_dicts(cfg.get('model'), 'model'):
        path = init.get('checkpoint')
        if init.get('type') == 'Pretrained' and _is_local(path):
            _check_checkpoint(path, f'{where}.checkpoint: pretrained '
                              'checkpoint')


def _check_checkpoint(path, what):
    try:
        check_checkpoint_file(osp.expanduser(path), what)
    except FileNotFoundError as err:  # a launch problem, not an OSError
        raise LaunchError(str(err)) from None


# Image loaders that use_safe_image_loading replaces.
LOAD_IMAGE_TYPES = frozenset(
    f'{scope}LoadImageFromFile'
    for scope in ('', 'mmcv.', 'mmdet.', 'mmseg.', 'mmpretrain.'))


def use_safe_image_loading(cfg, train_on_error: str = 'raise') -> int:
    """Load images with
    :class:`~mmpos.datasets.robust_loading.SafeLoadImageFromFile` in every
    dataloader pipeline of ``cfg``.

    Each ``LoadImageFromFile`` (not asked to ``ignore_empty``) becomes
    ``SafeLoadImageFromFile`` with the same arguments and
    ``on_error=train_on_error`` in the training pipelines, ``'raise'`` in
    val/test ones (test-mode datasets cannot skip a sample). Returns the
    number replaced.
    """
    count = 0
    for split in ('train', 'val', 'test'):
        loader = cfg.get(f'{split}_dataloader') or {}
        for _, node in config_dicts(loader.get('dataset')):
            if node.get('type') in LOAD_IMAGE_TYPES and \
                    not node.get('ignore_empty'):
                node['type'] = 'mmpretrain.SafeLoadImageFromFile'
                node['on_error'] = (train_on_error if split == 'train' else
                                    'raise')
                count += 1
    return count


def _export_slurm_env():
    """Translate SLURM's variables into the ones ``env://`` init reads."""
    node_list = os.environ['SLURM_NODELIST']
    host = subprocess.getoutput(
        f'scontrol show hostname {node_list} | head -n1')
    os.environ.setdefault('MASTER_ADDR', host)
    os.environ.setdefault('MASTER_PORT', '29500')
    os.environ['WORLD_SIZE'] = os.environ['SLURM_NTASKS']
    os.environ['RANK'] = os.environ['SLURM_PROCID']
    os.environ['LOCAL_RANK'] = os.environ['SLURM_LOCALID']


def start_cpu_process_group(cfg, launcher):
    """Start a gloo process group when distributed training runs on CPU.

    On a machine without CUDA this initialises ``torch.distributed`` with the
    gloo backend before mmengine's Runner does (the Runner skips its own
    ``init_dist`` when a group exists) and wraps the model in DDP without
    ``device_ids``, as CPU modules require. Does nothing with CUDA or with
    ``launcher='none'``.

    Returns:
        bool: whether a CPU process group was started.
    """
    if launcher == 'none' or torch.cuda.is_available():
        return False
    if launcher == 'slurm':
        _export_slurm_env()
    elif launcher != 'pytorch':
        raise LaunchError(f'launcher {launcher!r} is not supported on CPU; '
                          "use 'pytorch' (torchrun) or 'slurm'")
    if not torch_dist.is_initialized():
        torch_dist.init_process_group(backend='gloo')
    cfg.setdefault('env_cfg', {}).setdefault('dist_cfg', {})['backend'] = 'gloo'
    if cfg.get('model_wrapper_cfg') is None:
        cfg.model_wrapper_cfg = dict(
            type='MMDistributedDataParallel',
            device_ids=None,
            broadcast_buffers=False,
            find_unused_parameters=cfg.get('find_unused_parameters', False))
    return True


# What mmengine logs once per parameter while it builds a run (hundreds of
# lines: the optimizer's parameter-wise options and skipped frozen
# parameters, the init of each parameter)
PER_PARAMETER = ('is skipped since its requires_grad=False',
                 'paramwise_options -- ',
                 'The value is the same before and after calling '
                 '`init_weights`')


class _PerParameterFilter(logging.Filter):

    def filter(self, record):
        message = record.getMessage()
        return not any(text in message for text in PER_PARAMETER)


def quiet_console(logger: logging.Logger) -> None:
    """Keep mmengine's per-parameter records (:data:`PER_PARAMETER`) off
    the console handlers of ``logger`` (the runner's); its log file keeps
    them."""
    for handler in logger.handlers:
        if type(handler) is logging.StreamHandler and not any(
                isinstance(f, _PerParameterFilter) for f in handler.filters):
            handler.addFilter(_PerParameterFilter())


def rank_processes():
    """``[(host, pid), ...]`` of every rank of the default process group
    (one ``all_gather_object`` at start-up), or ``[]`` when not
    distributed; :func:`lost_rank` names a dead rank with it."""
    if not (torch_dist.is_available() and torch_dist.is_initialized()) or \
            torch_dist.get_world_size() < 2:
        return []
    found = [None] * torch_dist.get_world_size()
    torch_dist.all_gather_object(found, (socket.gethostname(), os.getpid()))
    return found


def _running(pid) -> bool:
    """Whether process ``pid`` runs (a zombie, ended but not yet reaped by
    its launcher, does not)."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


# What gloo and NCCL raise in a rank whose peer process has ended.
PEER_LOST = ('Connection reset by peer', 'Connection closed by peer',
             'Broken pipe', 'Connection refused', 'NCCL communicator was '
             'aborted', 'NCCL error', 'Socket Timeout', 'Timed out')


# A killed process closes its sockets before it ends: the peer's collective
# can fail while the process is still exiting (longer on a loaded machine).
EXIT_GRACE_SECONDS = 10.


def lost_rank(err: BaseException, processes, grace=EXIT_GRACE_SECONDS):
    """One line for ``err`` when it is a collective that failed because
    another rank's process ended (``processes`` from
    :func:`rank_processes`), else ``None``.

    The ranks on this host whose process no longer runs are named; a rank
    on another host is reported as such (its launcher names it). When
    every other rank on this host still runs, they are looked at again for
    up to ``grace`` seconds: a peer whose connection closed may still be
    exiting.
    """
    text = ' '.join(str(err).split())
    if not processes or not isinstance(err, RuntimeError) or \
            not any(p in text for p in PEER_LOST):
        return None
    rank, host = global_rank(), socket.gethostname()
    others = [(other, where, pid)
              for other, (where, pid) in enumerate(processes)
              if other != rank and where == host]
    end = time.monotonic() + grace
    while True:
        dead = [f'rank {other} (pid {pid} on {where})'
                for other, where, pid in others if not _running(pid)]
        if dead or not others or time.monotonic() >= end:
            break
        time.sleep(0.05)
    if not dead and all(where == host for where, _ in processes):
        return None  # every rank still runs: another failure
    who = (' and '.join(dead) + (' has' if len(dead) == 1 else ' have') +
           ' ended' if dead else 'a rank on another host ended')
    detail = re.sub(r'^\[[^\]]*\] ', '', text).split('. ')[0]
    return (f'rank {rank} of {len(processes)} stopped: {who}, and the job '
            f'cannot go on without it ({detail})')
