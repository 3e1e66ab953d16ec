"""Evaluate a checkpoint with any mmpos, mmpretrain, mmdet or mmseg config.

::

    python tools/test.py CONFIG CHECKPOINT [--work-dir DIR] [--out FILE]
        [--tta] [--skip-data-check]
    bash tools/dist_test.sh CONFIG CHECKPOINT 8 [same options]

The checkpoint must fit the model (every model tensor present with its
shape); bad input is reported as one line ``test.py: error: ...`` as in
``tools/train.py``. ``--tta`` tests with the config's test-time
augmentation as mmdet's and mmseg's ``tools/test.py`` do: the test set is
read through ``cfg.tta_pipeline`` (e.g. mmseg's multi-scale + flip) and the
model is wrapped by ``cfg.tta_model`` (e.g. ``SegTTAModel``), which merges
the predictions of the augmented views.
"""
import mmpos  # noqa: F401  (registers mmpos modules)
from mmpos.checkpoint import use_safe_io
from mmpos.engine.hooks import CheckpointFitHook
from mmpos.utils.cli import exit_on_bad_input
from mmpos.utils.config_check import blame_config
from mmpos.utils.launch import (LaunchError, build_runner,
                                check_checkpoint_paths,
                                finish_launch_config, launcher_parser,
                                load_launch_config, parse_common,
                                remove_partial_output)


def parse_args(argv=None):
    parser = launcher_parser('Test a checkpoint', 'where logs and metrics go',
                             'test')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument(
        '--out', help='dump the metrics to this file (json/yaml/pkl)')
    parser.add_argument(
        '--tta',
        action='store_true',
        help="test-time augmentation: the config's tta_pipeline and "
        'tta_model (multi-scale and flip for mmseg configs)')
    return parse_common(parser, argv)


def use_tta(cfg):
    """``cfg`` tested through ``tta_pipeline`` with the model wrapped by
    ``tta_model`` (mmdet/mmseg ``tools/test.py --tta``)."""
    missing = [k for k in ('tta_model', 'tta_pipeline') if k not in cfg]
    if missing:
        raise LaunchError(f'--tta: the config defines no {" / ".join(missing)}'
                          ' (mmseg configs get them from their dataset and '
                          'runtime bases)')
    cfg.test_dataloader.dataset.pipeline = cfg.tta_pipeline
    cfg.model = dict(**cfg.tta_model, module=cfg.model)


def build_test_config(args):
    cfg = load_launch_config(args)
    cfg.load_from = args.checkpoint
    check_checkpoint_paths(cfg, 'checkpoint')
    if args.tta:
        use_tta(cfg)
    return finish_launch_config(cfg, args, ('test', ))


def main(argv=None):
    args = parse_args(argv)
    use_safe_io()  # safe checkpoint reads, atomic writes (mmpos.checkpoint)
    with exit_on_bad_input('test.py'):
        cfg = build_test_config(args)
        with remove_partial_output(cfg.work_dir), \
                blame_config(cfg, args.cfg_options):
            runner = build_runner(cfg, CheckpointFitHook(args.checkpoint))
            metrics = runner.test()
    if args.out and runner.rank == 0:
        import mmengine
        mmengine.dump(metrics, args.out)


if __name__ == '__main__':
    main()
