"""Helpers shared by ``tools/train.py`` and ``tools/test.py``.

They make one launcher serve mmpretrain, mmdet and mmseg configs (the
config's ``default_scope`` decides which library's registries are used) and
let the same command run distributed on CPU-only machines, where mmengine's
own ``init_dist`` would call ``torch.cuda.set_device`` and fail. They also
turn bad input into one line (:func:`exit_on_bad_input`), check configs and
checkpoint paths before anything is built, load images with
``SafeLoadImageFromFile`` (:func:`use_safe_image_loading`) and clean up after
a run that failed before training (:func:`remove_partial_output`).
"""
import argparse
import contextlib
import os
import os.path as osp
import re
import shutil
import subprocess
import sys

import torch
import torch.distributed as torch_dist
from mmengine.config import Config, DictAction
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

from .checkpoint_io import UnsafeCheckpointError
from .config_check import config_key_problems, new_option_keys
from .errors import BadInputError

# Image loaders that the tools replace with mmpos' SafeLoadImageFromFile.
LOAD_IMAGE_TYPES = frozenset(
    f'{scope}LoadImageFromFile'
    for scope in ('', 'mmcv.', 'mmdet.', 'mmseg.', 'mmpretrain.'))
SAFE_LOAD_IMAGE = 'mmpretrain.SafeLoadImageFromFile'


class LaunchError(RuntimeError):
    """A problem with the user's command line or config, reported in one line."""


# Errors that the tools print as one line (MMPOS_DEBUG=1: traceback).
USER_ERRORS = (LaunchError, BadInputError, UnsafeCheckpointError,
               FileNotFoundError)


def one_line(err: BaseException) -> str:
    """The message of ``err`` on one line.

    An exception raised in a DataLoader worker comes back as ``Caught X in
    DataLoader worker process 0. Original Traceback ... X: message``; only
    the original message is kept.
    """
    text = str(err).strip()
    if 'Original Traceback' in text:  # last line: 'pkg.mod.Error: message'
        text = re.sub(r'^[A-Za-z_][\w.]*: ', '', text.splitlines()[-1])
    return ' '.join(text.split())


@contextlib.contextmanager
def exit_on_bad_input(prog: str, errors=()):
    """Turn :data:`USER_ERRORS` (and ``errors``) into ``sys.exit`` with the
    one-line message ``<prog>: error: <message>``, unless ``MMPOS_DEBUG``
    is set (then the traceback is shown)."""
    try:
        yield
    except USER_ERRORS + tuple(errors) as err:
        if os.environ.get('MMPOS_DEBUG'):
            raise
        sys.exit(f'{prog}: error: {one_line(err)}')


@contextlib.contextmanager
def remove_partial_output(work_dir: str, keep=lambda: False):
    """On any failure, delete what the run created in ``work_dir`` unless
    ``keep()`` says it produced something (e.g. trained an iteration).

    A work dir that did not exist is removed as a whole; in an existing one
    only the entries that are new are removed, never what was there before.
    Only rank 0 deletes.
    """
    existed = osp.isdir(work_dir)
    before = set(os.listdir(work_dir)) if existed else set()
    try:
        yield
    except BaseException:
        if int(os.environ.get('RANK', 0)) == 0 and not keep():
            if not existed:
                shutil.rmtree(work_dir, ignore_errors=True)
            elif osp.isdir(work_dir):
                for name in set(os.listdir(work_dir)) - before:
                    path = osp.join(work_dir, name)
                    if osp.isdir(path) and not osp.islink(path):
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        os.remove(path)
        raise


def add_common_args(parser: argparse.ArgumentParser) -> None:
    """Arguments shared by train.py and test.py (config options, launcher)."""
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
    # torch.distributed.launch passes --local-rank; torchrun sets LOCAL_RANK.
    parser.add_argument('--local-rank', '--local_rank', type=int, default=0)


def parse_common(parser: argparse.ArgumentParser, argv=None):
    """Parse ``argv`` after adding :func:`add_common_args` to ``parser``;
    sets ``LOCAL_RANK`` from ``--local-rank`` unless already set."""
    add_common_args(parser)
    args = parser.parse_args(argv)
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args


def launcher_parser(description: str, work_dir_help: str,
                    checked: str) -> argparse.ArgumentParser:
    """Parser of a launcher: ``config`` (the first positional),
    ``--work-dir`` and ``--skip-data-check`` (``checked``: which annotations
    are validated otherwise); parse it with :func:`parse_common`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument('config', help='config file')
    parser.add_argument('--work-dir', help=work_dir_help)
    parser.add_argument(
        '--skip-data-check',
        action='store_true',
        help=f'do not validate the {checked} annotations before starting')
    return parser


def load_launch_config(args):
    """:func:`load_config` of ``args.config`` with ``--cfg-options``, its
    ``launcher`` and work dir (:func:`resolve_work_dir`) set."""
    cfg = load_config(args.config, args.cfg_options)
    cfg.launcher = args.launcher
    resolve_work_dir(cfg, args.config, args.work_dir)
    return cfg


def finish_launch_config(cfg, args, splits, train_on_error='raise'):
    """Last steps before the runner is built: safe image loading
    (:func:`use_safe_image_loading`), the ``splits``' datasets validated on
    rank 0 unless ``--skip-data-check``, and a CPU process group
    (:func:`prepare_cpu_distributed`). Returns ``cfg``."""
    # mmpos.datasets imports mmpos.utils: imported here, not at the top.
    from mmpos.datasets.validate import check_config_datasets
    use_safe_image_loading(cfg, train_on_error)
    if not args.skip_data_check and int(os.environ.get('RANK', 0)) == 0:
        check_config_datasets(cfg, splits)
    prepare_cpu_distributed(cfg, args.launcher)
    return cfg


def build_runner(cfg, hook):
    """The config's runner (``runner_type`` from mmengine's ``RUNNERS``,
    else :class:`~mmengine.runner.Runner`) with ``hook`` registered."""
    runner = (RUNNERS.build(cfg)
              if 'runner_type' in cfg else Runner.from_cfg(cfg))
    runner.register_hook(hook)
    return runner


def load_config(path, cfg_options=None):
    """Read a config file and merge ``--cfg-options`` into it.

    Raises:
        LaunchError: when the file is missing or cannot be parsed, or has
            misspelled keys (:mod:`mmpos.utils.config_check`).
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
        cfg.merge_from_dict(cfg_options)
    problems = config_key_problems(cfg, new_keys)
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


def resolve_work_dir(cfg, config_path, work_dir=None):
    """CLI ``--work-dir`` > ``work_dir`` in the config > ``work_dirs/<name>``."""
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get('work_dir') is None:
        name = osp.splitext(osp.basename(config_path))[0]
        cfg.work_dir = osp.join('work_dirs', name)
    return cfg.work_dir


def check_work_dir(work_dir, resume):
    """Refuse to start a fresh run on top of another run's checkpoints.

    mmengine names checkpoints ``iter_N.pth``/``epoch_N.pth``, so a second
    fresh run in the same work dir would silently overwrite the first one's.
    """
    marker = osp.join(work_dir, 'last_checkpoint')
    if resume or not osp.isfile(marker):
        return
    with open(marker) as f:
        last = f.read().strip()
    raise LaunchError(
        f'work dir {work_dir} already holds checkpoints (last: {last}); '
        'pass --resume to continue that run or choose another --work-dir')


def _is_local(path) -> bool:
    return isinstance(path, str) and '://' not in path


def _pretrained_inits(node, where):
    """``(where, init_cfg)`` of every ``Pretrained`` init_cfg in ``node``."""
    if isinstance(node, dict):
        if node.get('type') == 'Pretrained':
            yield where, node
        for key, value in node.items():
            yield from _pretrained_inits(value, f'{where}.{key}')
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from _pretrained_inits(value, f'{where}.{i}')


def check_checkpoint_paths(cfg):
    """Refuse local checkpoints that do not exist before anything is built:
    ``load_from`` and every ``init_cfg=dict(type='Pretrained', ...)``
    (mmengine would fail after creating the work dir, or, for a Pretrained
    init of a module that is not mmpos', warn and train from random)."""
    load_from = cfg.get('load_from')
    if _is_local(load_from) and not osp.isfile(osp.expanduser(load_from)):
        raise LaunchError(f'load_from checkpoint not found: {load_from}')
    for where, init in _pretrained_inits(cfg.get('model'), 'model'):
        path = init.get('checkpoint')
        if _is_local(path) and not osp.isfile(osp.expanduser(path)):
            raise LaunchError(f'{where}.checkpoint: pretrained checkpoint '
                              f'not found: {path}')


def _use_safe_loader(node, on_error) -> int:
    if isinstance(node, (list, tuple)):
        return sum(_use_safe_loader(value, on_error) for value in node)
    if not isinstance(node, dict):
        return 0
    if node.get('type') in LOAD_IMAGE_TYPES and not node.get('ignore_empty'):
        node['type'], node['on_error'] = SAFE_LOAD_IMAGE, on_error
        return 1
    return sum(_use_safe_loader(value, on_error) for value in node.values())


def use_safe_image_loading(cfg, train_on_error='raise') -> int:
    """Load images with :class:`~mmpos.datasets.robust_loading.
    SafeLoadImageFromFile` in every dataloader pipeline.

    Each ``LoadImageFromFile`` (not asked to ``ignore_empty``) becomes
    ``SafeLoadImageFromFile`` with the same arguments and
    ``on_error=train_on_error`` in the training pipelines, ``'raise'`` in
    val/test ones (test-mode datasets cannot skip a sample). Returns the
    number replaced.
    """
    count = 0
    for split in ('train', 'val', 'test'):
        loader = cfg.get(f'{split}_dataloader')
        if loader:
            count += _use_safe_loader(
                loader.get('dataset'),
                train_on_error if split == 'train' else 'raise')
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


def prepare_cpu_distributed(cfg, launcher):
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
