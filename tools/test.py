"""Evaluate a checkpoint with any mmpos, mmpretrain, mmdet or mmseg config.

::

    python tools/test.py CONFIG CHECKPOINT [--work-dir DIR] [--out FILE]
        [--tta] [--skip-data-check] [--cfg-options KEY=VALUE ...]
    bash tools/dist_test.sh CONFIG CHECKPOINT 8 [same options]

The checkpoint must fit the model (every model tensor present with its
shape); bad input is reported as one line ``test.py: error: ...`` as in
``tools/train.py``. The test holds its work dir like a training run does: a
work dir that a training run is using (both default to
``work_dirs/<config>``) is refused, and a failed test removes only what it
wrote itself. ``--tta`` tests with the config's test-time augmentation as
mmdet's and mmseg's ``tools/test.py`` do: the test set is read through
``cfg.tta_pipeline`` (e.g. mmseg's multi-scale + flip) and the model is
wrapped by ``cfg.tta_model`` (e.g. ``SegTTAModel``), which merges the
predictions of the augmented views.
"""
import argparse

import mmengine
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

import mmpos  # noqa: F401  (registers mmpos modules)
from mmpos.checkpoint import use_safe_io
from mmpos.datasets.robust_loading import use_safe_image_loading
from mmpos.guardrails.data_check import check_config_datasets
from mmpos.engine.hooks import CheckpointFitHook
from mmpos.guardrails.cli import exit_on_bad_input
from mmpos.guardrails.config_check import blame_config
from mmpos.guardrails.launch import (LaunchError, add_launch_arguments,
                                apply_launch_arguments, check_checkpoint_paths,
                                check_work_dir, global_rank, load_config,
                                start_cpu_process_group, work_dir_lock)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description='Test a checkpoint')
    parser.add_argument('config', help='config file')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--work-dir', help='where logs and metrics go')
    parser.add_argument(
        '--out', help='dump the metrics to this file (json/yaml/pkl)')
    parser.add_argument(
        '--tta',
        action='store_true',
        help="test-time augmentation: the config's tta_pipeline and "
        'tta_model (multi-scale and flip for mmseg configs)')
    add_launch_arguments(parser)
    return parser.parse_args(argv)


def merge_args(cfg, args):
    """The command line's choices in ``cfg``."""
    apply_launch_arguments(cfg, args)
    check_work_dir(cfg.work_dir)  # not one a training run is using
    cfg.load_from = args.checkpoint
    check_checkpoint_paths(cfg, 'checkpoint')
    if args.tta:
        missing = [k for k in ('tta_model', 'tta_pipeline') if k not in cfg]
        if missing:
            raise LaunchError(
                f'--tta: the config defines no {" / ".join(missing)} (mmseg '
                'configs get them from their dataset and runtime bases)')
        cfg.test_dataloader.dataset.pipeline = cfg.tta_pipeline
        cfg.model = dict(**cfg.tta_model, module=cfg.model)
    use_safe_image_loading(cfg)
    if not args.skip_data_check and global_rank() == 0:
        check_config_datasets(cfg, ('test', ))
    return cfg


def main(argv=None):
    args = parse_args(argv)
    use_safe_io()  # safe checkpoint reads, atomic writes (mmpos.checkpoint)
    with exit_on_bad_input('test.py'):
        cfg = merge_args(load_config(args.config, args.cfg_options), args)
        start_cpu_process_group(cfg, args.launcher)
        with work_dir_lock(cfg.work_dir), \
                blame_config(cfg, args.cfg_options):
            runner = (RUNNERS.build(cfg)
                      if 'runner_type' in cfg else Runner.from_cfg(cfg))
            runner.register_hook(CheckpointFitHook(args.checkpoint))
            metrics = runner.test()
        if args.out and runner.rank == 0:
            mmengine.dump(metrics, args.out)


if __name__ == '__main__':
    main()
