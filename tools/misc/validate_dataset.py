"""List every annotation problem of a config's datasets, one per line.

    python tools/misc/validate_dataset.py CONFIG [--splits train val test]
        [--cfg-options KEY=VALUE ...] [--max-problems N]

COCO-style json (mmdet ``CocoDataset`` and subclasses) and semantic
segmentation label maps (mmseg datasets) are checked as in
:mod:`mmpos.guardrails.data_check`, every entry; ``tools/train.py`` and
``tools/test.py`` run the same checks on the annotation files and a fixed
sample of 32 label maps per dataset, and stop at the first problem. Exit
status 0: no problem; 1: problems (or an unreadable config).
"""
import argparse
import sys
from itertools import islice

from mmengine.config import DictAction

import mmpos  # noqa: F401  (registers mmpos modules)
from mmpos.guardrails.cli import cli_main
from mmpos.guardrails.data_check import config_problems
from mmpos.guardrails.launch import load_config


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config')
    parser.add_argument('--splits', nargs='+', default=['train', 'val',
                                                        'test'],
                        choices=['train', 'val', 'test'])
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config entries, e.g. '
                        'train_dataloader.dataset.data_root=DIR')
    parser.add_argument('--max-problems', type=int, default=100,
                        help='stop after this many problems')
    return parser.parse_args(argv)


@cli_main('validate_dataset.py')
def main(argv=None):
    args = parse_args(argv)
    cfg = load_config(args.config, args.cfg_options)
    problems = list(islice(config_problems(cfg, args.splits),
                           args.max_problems))
    for problem in problems:
        print(problem)
    if problems:
        more = ' (stopped there)' if len(problems) == args.max_problems \
            else ''
        sys.exit(f'{len(problems)} problem(s){more}')
    print(f'{args.config}: no problems in the {", ".join(args.splits)} '
          'datasets')


if __name__ == '__main__':
    main()
