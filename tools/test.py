"""Evaluate a checkpoint with any mmpos, mmpretrain, mmdet or mmseg config.

::

    python tools/test.py CONFIG CHECKPOINT [--work-dir DIR] [--out FILE]
        [--skip-data-check]
    bash tools/dist_test.sh CONFIG CHECKPOINT 8 [same options]

The checkpoint must fit the model (every model tensor present with its
shape); bad input is reported as one line ``test.py: error: ...`` as in
``tools/train.py``.
"""
import argparse
import os

from mmengine.registry import RUNNERS
from mmengine.runner import Runner

import mmpos  # noqa: F401  (registers mmpos modules)
from mmpos.datasets.validate import check_config_datasets
from mmpos.engine.hooks import CheckpointFitHook
from mmpos.utils.launch import (LaunchError, add_common_args,
                                exit_on_bad_input, load_config, parse_common,
                                prepare_cpu_distributed,
                                remove_partial_output, resolve_work_dir,
                                use_safe_image_loading)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description='Test a checkpoint')
    parser.add_argument('config', help='config file')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--work-dir', help='where logs and metrics go')
    parser.add_argument(
        '--out', help='dump the metrics to this file (json/yaml/pkl)')
    parser.add_argument(
        '--skip-data-check',
        action='store_true',
        help='do not validate the test annotations before starting')
    add_common_args(parser)
    return parse_common(parser, argv)


def build_test_config(args):
    if not os.path.isfile(args.checkpoint):
        raise LaunchError(f'checkpoint not found: {args.checkpoint}')
    cfg = load_config(args.config, args.cfg_options)
    cfg.launcher = args.launcher
    resolve_work_dir(cfg, args.config, args.work_dir)
    cfg.load_from = args.checkpoint
    use_safe_image_loading(cfg)
    if not args.skip_data_check and int(os.environ.get('RANK', 0)) == 0:
        check_config_datasets(cfg, ('test', ))
    prepare_cpu_distributed(cfg, args.launcher)
    return cfg


def main(argv=None):
    args = parse_args(argv)
    with exit_on_bad_input('test.py'):
        cfg = build_test_config(args)
        with remove_partial_output(cfg.work_dir):
            runner = (RUNNERS.build(cfg) if 'runner_type' in cfg else
                      Runner.from_cfg(cfg))
            runner.register_hook(CheckpointFitHook(args.checkpoint))
            metrics = runner.test()
    if args.out and runner.rank == 0:
        import mmengine
        mmengine.dump(metrics, args.out)


if __name__ == '__main__':
    main()
