"""Train any mmpos, mmpretrain, mmdet or mmseg config.

The config's ``default_scope`` picks the library whose registries build the
model, datasets and metrics; mmpos is imported first so its modules are in
mmpretrain's registry. Examples::

    python tools/train.py CONFIG [--work-dir DIR] [--resume [CKPT]]
        [--auto-resume] [--amp] [--bad-images raise|skip] [--auto-scale-lr]
        [--skip-data-check] [--cfg-options KEY=VALUE ...]
    bash tools/dist_train.sh CONFIG 8 [same options]

As mmpretrain's ``tools/train.py``, plus the gaps mmengine leaves, each a
named function of :mod:`mmpos.guardrails.launch`: bad input (a misspelled config
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
import os
import sys

import torch
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

import mmpos  # noqa: F401  (registers mmpos modules)
from mmpos.checkpoint import use_safe_io
from mmpos.datasets.robust_loading import use_safe_image_loading
from mmpos.guardrails.data_check import check_config_datasets
from mmpos.engine.hooks import (PREEMPTED_EXIT_CODE, CheckpointFitHook,
                                NonFiniteLossError, Preempted, PreemptionHook)
from mmpos.guardrails.cli import exit_on_bad_input
from mmpos.guardrails.config_check import blame_config
from mmpos.guardrails.launch import (LaunchError, add_launch_arguments,
                                apply_launch_arguments, check_checkpoint_paths,
                                check_work_dir, global_rank, load_config,
                                lost_rank, quiet_console,
                                rank_processes, resume_checkpoint,
                                start_cpu_process_group, work_dir_lock)


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


def merge_args(cfg, args):
    """The command line's choices in ``cfg``."""
    apply_launch_arguments(cfg, args)

    resume = args.resume is not None or args.auto_resume
    check_work_dir(cfg.work_dir, fresh_training=not resume)
    if args.resume not in (None, 'auto'):
        cfg.resume, cfg.load_from = True, args.resume
    elif resume:
        latest = resume_checkpoint(cfg.work_dir)
        if latest is None and not args.auto_resume:
            raise LaunchError(
                f'--resume: nothing to resume in {cfg.work_dir} (no '
                'last_checkpoint); check --work-dir, or pass --auto-resume '
                'to start fresh when there is no checkpoint')
        cfg.resume, cfg.load_from = latest is not None, latest
    check_checkpoint_paths(cfg, '--resume checkpoint' if cfg.get('resume')
                           else 'load_from checkpoint')

    if args.amp:
        if not torch.cuda.is_available():
            raise LaunchError('--amp needs a CUDA device (mmengine\'s '
                              'AmpOptimWrapper); none is available')
        cfg.optim_wrapper.type = 'AmpOptimWrapper'
        cfg.optim_wrapper.setdefault('loss_scale', 'dynamic')
    if args.auto_scale_lr:
        if 'base_batch_size' not in cfg.get('auto_scale_lr', {}):
            raise LaunchError('--auto-scale-lr: the config has no '
                              'auto_scale_lr.base_batch_size')
        cfg.auto_scale_lr.enable = True

    use_safe_image_loading(cfg, args.bad_images)
    if not args.skip_data_check and global_rank() == 0:
        check_config_datasets(cfg, ('train', 'val'))
    return cfg


def main(argv=None):
    args = parse_args(argv)
    use_safe_io()  # safe checkpoint reads, atomic writes (mmpos.checkpoint)
    runner, status, processes = None, 0, []

    def trained():  # a step taken or a checkpoint saved: keep the output
        return runner is not None and (
            runner.message_hub.get_info('iter', 0) > 0
            or runner.message_hub.get_info('last_ckpt') is not None)

    with exit_on_bad_input('train.py', (NonFiniteLossError, )):
        cfg = merge_args(load_config(args.config, args.cfg_options), args)
        start_cpu_process_group(cfg, args.launcher)
        try:
            with work_dir_lock(cfg.work_dir, keep_output=trained), \
                    blame_config(cfg, args.cfg_options):
                runner = (RUNNERS.build(cfg)
                          if 'runner_type' in cfg else Runner.from_cfg(cfg))
                # resuming: every model tensor must be in the checkpoint;
                # load_from (fine-tuning): at least one
                runner.register_hook(CheckpointFitHook(
                    cfg.get('load_from'), strict=bool(cfg.get('resume'))))
                runner.register_hook(PreemptionHook())
                processes = rank_processes()
                quiet_console(runner.logger)
                runner.train()
        except Preempted as stop:
            if global_rank() == 0:
                print(f'train.py: {stop}', file=sys.stderr, flush=True)
            status = PREEMPTED_EXIT_CODE
        except RuntimeError as err:  # a collective whose peer has died
            message = lost_rank(err, processes)
            if message is None or os.environ.get('MMPOS_DEBUG'):
                raise
            sys.exit(f'train.py: error: {message}')
    # A process group left for the interpreter's exit to tear down can abort
    # a rank ("terminate called without an active exception", seen with 2
    # gloo processes on a loaded CPU); release it once training is done.
    if torch.distributed.is_available() and \
            torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    if status:
        sys.exit(status)


if __name__ == '__main__':
    main()
