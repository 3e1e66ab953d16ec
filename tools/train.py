"""Train any mmpos, mmpretrain, mmdet or mmseg config.

The config's ``default_scope`` picks the library whose registries build the
model, datasets and metrics; mmpos is imported first so its modules are in
mmpretrain's registry. Examples::

    python tools/train.py CONFIG [--work-dir DIR] [--resume [CKPT]]
        [--auto-resume] [--amp] [--bad-images raise|skip] [--auto-scale-lr]
        [--skip-data-check] [--cfg-options KEY=VALUE ...]
    bash tools/dist_train.sh CONFIG 8 [same options]

As mmpretrain's ``tools/train.py``, plus the gaps mmengine leaves, filled
by :func:`mmpos.guardrails.prepare`: bad input (a misspelled config
key or ``type``, a missing or unfitting checkpoint, bad annotations, an
unreadable image, a value a constructor rejects, a work dir another run
holds) is one line ``train.py: error: ...`` with exit status 1
(``MMPOS_DEBUG=1`` shows the traceback); a run that fails before its first
iteration removes what it wrote, and only that; ``--resume`` takes the
newest intact checkpoint and stops when there is none (``--auto-resume``
starts fresh then); distributed runs work on CPU (gloo). ``SIGTERM`` or
``SIGUSR1`` (Slurm's pre-kill signals) saves an intact checkpoint after the
iteration in progress and exits with status 75
(:class:`~mmpos.engine.hooks.PreemptionHook`); ``tools/slurm_train.sh``
requeues on that status.
"""
import argparse

import mmpos  # noqa: F401  (registers mmpos modules)
from mmpos.guardrails import add_launch_arguments, prepare


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description='Train a model')
    parser.add_argument('config', help='config file')
    parser.add_argument('--work-dir', help='where logs and checkpoints go')
    parser.add_argument(
        '--resume',
        nargs='?',
        const='auto',
        help='resume from CKPT, or without a value from the newest '
        'checkpoint in the work dir (an error if there is none)')
    parser.add_argument(
        '--auto-resume',
        action='store_true',
        help='resume from the newest checkpoint in the work dir if there is '
        'one, else start fresh')
    parser.add_argument(
        '--amp', action='store_true', help='automatic mixed precision (CUDA)')
    parser.add_argument(
        '--bad-images',
        choices=['raise', 'skip'],
        default='raise',
        help='a missing or corrupt training image stops the run (raise) or '
        'is skipped with a warning naming it (skip)')
    parser.add_argument(
        '--auto-scale-lr',
        action='store_true',
        help='scale the lr by the actual total batch / '
        'auto_scale_lr.base_batch_size of the config')
    add_launch_arguments(parser)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    with prepare(args.config, args, 'train') as run:
        run.build().train()


if __name__ == '__main__':
    main()
