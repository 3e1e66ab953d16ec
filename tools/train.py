"""Train any mmpos, mmpretrain, mmdet or mmseg config.

The config's ``default_scope`` picks the library whose registries build the
model, datasets and metrics; mmpos is imported first so its modules are in
mmpretrain's registry. Examples::

    python tools/train.py CONFIG [--work-dir DIR] [--resume [CKPT]] [--amp]
    bash tools/dist_train.sh CONFIG 8 [same options]
"""
import argparse
import os
import sys

import torch
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

import mmpos  # noqa: F401  (registers mmpos modules)
from mmpos.engine.hooks import NonFiniteLossError
from mmpos.utils.launch import (LaunchError, add_common_args, check_work_dir,
                                load_config, parse_common,
                                prepare_cpu_distributed, resolve_work_dir)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description='Train a model')
    parser.add_argument('config', help='config file')
    parser.add_argument('--work-dir', help='where logs and checkpoints go')
    parser.add_argument(
        '--resume',
        nargs='?',
        const='auto',
        help='resume from CKPT, or without a value from the latest '
        'checkpoint in the work dir')
    parser.add_argument(
        '--amp', action='store_true', help='automatic mixed precision (CUDA)')
    add_common_args(parser)
    return parse_common(parser, argv)


def build_train_config(args):
    cfg = load_config(args.config, args.cfg_options)
    cfg.launcher = args.launcher
    work_dir = resolve_work_dir(cfg, args.config, args.work_dir)

    if args.resume == 'auto':
        cfg.resume, cfg.load_from = True, None
    elif args.resume is not None:
        if not os.path.isfile(args.resume):
            raise LaunchError(f'--resume checkpoint not found: {args.resume}')
        cfg.resume, cfg.load_from = True, args.resume
    check_work_dir(work_dir, resume=args.resume is not None)

    if args.amp:
        if not torch.cuda.is_available():
            raise LaunchError('--amp needs a CUDA device (mmengine\'s '
                              'AmpOptimWrapper); none is available')
        cfg.optim_wrapper.type = 'AmpOptimWrapper'
        cfg.optim_wrapper.setdefault('loss_scale', 'dynamic')
    prepare_cpu_distributed(cfg, args.launcher)
    return cfg


def main(argv=None):
    args = parse_args(argv)
    try:
        cfg = build_train_config(args)
    except LaunchError as err:
        sys.exit(f'train.py: error: {err}')
    runner = (RUNNERS.build(cfg) if 'runner_type' in cfg else
              Runner.from_cfg(cfg))
    try:
        runner.train()
    except NonFiniteLossError as err:
        sys.exit(f'train.py: error: {err}')


if __name__ == '__main__':
    main()
