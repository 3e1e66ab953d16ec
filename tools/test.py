"""Evaluate a checkpoint with any mmpos, mmpretrain, mmdet or mmseg config.

::

    python tools/test.py CONFIG CHECKPOINT [--work-dir DIR] [--out FILE]
    bash tools/dist_test.sh CONFIG CHECKPOINT 8 [same options]
"""
import argparse
import os
import sys

from mmengine.registry import RUNNERS
from mmengine.runner import Runner

import mmpos  # noqa: F401  (registers mmpos modules)
from mmpos.utils.launch import (LaunchError, add_common_args, load_config,
                                parse_common, prepare_cpu_distributed,
                                resolve_work_dir)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description='Test a checkpoint')
    parser.add_argument('config', help='config file')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--work-dir', help='where logs and metrics go')
    parser.add_argument(
        '--out', help='dump the metrics to this file (json/yaml/pkl)')
    add_common_args(parser)
    return parse_common(parser, argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        if not os.path.isfile(args.checkpoint):
            raise LaunchError(f'checkpoint not found: {args.checkpoint}')
        cfg = load_config(args.config, args.cfg_options)
        cfg.launcher = args.launcher
        resolve_work_dir(cfg, args.config, args.work_dir)
        cfg.load_from = args.checkpoint
        prepare_cpu_distributed(cfg, args.launcher)
    except LaunchError as err:
        sys.exit(f'test.py: error: {err}')
    runner = (RUNNERS.build(cfg) if 'runner_type' in cfg else
              Runner.from_cfg(cfg))
    metrics = runner.test()
    if args.out and runner.rank == 0:
        import mmengine
        mmengine.dump(metrics, args.out)


if __name__ == '__main__':
    main()
