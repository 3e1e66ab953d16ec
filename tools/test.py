"""Evaluate a checkpoint with any mmpos, mmpretrain, mmdet or mmseg config.

::

    python tools/test.py CONFIG CHECKPOINT [--work-dir DIR] [--out FILE]
        [--tta] [--skip-data-check] [--cfg-options KEY=VALUE ...]
    bash tools/dist_test.sh CONFIG CHECKPOINT 8 [same options]

The checkpoint must fit the model (every model tensor present with its
shape); bad input is reported as one line ``test.py: error: ...`` as in
``tools/train.py`` (:func:`mmpos.guardrails.prepare`). The test holds its
work dir like a training run does: a work dir that a training run is using
(both default to ``work_dirs/<config>``) is refused, and a failed test
removes only what it wrote itself. ``--tta`` tests with the config's test-time augmentation as
mmdet's and mmseg's ``tools/test.py`` do: the test set is read through
``cfg.tta_pipeline`` (e.g. mmseg's multi-scale + flip) and the model is
wrapped by ``cfg.tta_model`` (e.g. ``SegTTAModel``), which merges the
predictions of the augmented views.
"""
import argparse

import mmengine

import mmpos  # noqa: F401  (registers mmpos modules)
from mmpos.guardrails import add_launch_arguments, prepare


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


def main(argv=None):
    args = parse_args(argv)
    with prepare(args.config, args, 'test') as run:
        runner = run.build()
        metrics = runner.test()
        if args.out and runner.rank == 0:
            mmengine.dump(metrics, args.out)


if __name__ == '__main__':
    main()
