"""Helpers shared by ``tools/train.py`` and ``tools/test.py``.

They make one launcher serve mmpretrain, mmdet and mmseg configs (the
config's ``default_scope`` decides which library's registries are used) and
let the same command run distributed on CPU-only machines, where mmengine's
own ``init_dist`` would call ``torch.cuda.set_device`` and fail.
"""
import argparse
import os
import os.path as osp
import subprocess

import torch
import torch.distributed as torch_dist
from mmengine.config import Config, DictAction


class LaunchError(RuntimeError):
    """A problem with the user's command line or config, reported in one line."""


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
    args = parser.parse_args(argv)
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args


def load_config(path, cfg_options=None):
    """Read a config file and merge ``--cfg-options`` into it.

    Raises:
        LaunchError: when the file is missing or cannot be parsed.
    """
    if not osp.isfile(path):
        raise LaunchError(f'config file not found: {path}')
    try:
        cfg = Config.fromfile(path)
    except Exception as err:  # mmengine raises many types for bad configs
        raise LaunchError(f'cannot read config {path}: '
                          f'{type(err).__name__}: {err}') from err
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    return cfg


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
