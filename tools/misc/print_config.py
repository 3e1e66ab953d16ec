"""Print a config as the tools run it: its ``_base_`` files merged and
``--cfg-options`` applied, checked as ``tools/train.py`` checks them
(misspelled keys and types are one line, before anything is built).

    python tools/misc/print_config.py CONFIG [--cfg-options KEY=VALUE ...]
"""
import argparse

from mmengine.config import DictAction

from mmpos.guardrails.cli import cli_main
from mmpos.guardrails.launch import load_config


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config entries, e.g. '
                        'model.backbone.rope.type=axial')
    return parser.parse_args(argv)


@cli_main('print_config.py')
def main(argv=None):
    args = parse_args(argv)
    print(load_config(args.config, args.cfg_options).pretty_text)


if __name__ == '__main__':
    main()
