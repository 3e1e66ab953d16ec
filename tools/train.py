"""Train any mmpos, mmpretrain, mmdet or mmseg config.

The config's ``default_scope`` picks the library whose registries build the
model, datasets and metrics; mmpos is imported first so its modules are in
mmpretrain's registry. Examples::

    python tools/train.py CONFIG [--work-dir DIR] [--resume [CKPT]] [--amp]
        [--bad-images raise|skip] [--auto-scale-lr] [--skip-data-check]
    bash tools/dist_train.sh CONFIG 8 [same options]

Bad input (a misspelled config key, a missing or unfitting checkpoint, bad
annotations, an unreadable image, an input size the backbone cannot take, a
config value a constructor rejects, a work dir another run holds) is
reported as one line ``train.py: error: ...`` with exit status 1, and a run
that fails before its first iteration leaves nothing behind in the work dir
(see README, "Bad input and failure behaviour"; ``MMPOS_DEBUG=1`` shows the
traceback). ``--auto-scale-lr`` scales the learning rate linearly with the
total batch (GPUs x ``train_dataloader.batch_size``) against the config's
``auto_scale_lr.base_batch_size`` (the batch its lr was set for), as
mmdet's and mmseg's ``tools/train.py`` do.
"""
import torch

import mmpos  # noqa: F401  (registers mmpos modules)
from mmpos.checkpoint import use_safe_io
from mmpos.engine.hooks import CheckpointFitHook, NonFiniteLossError
from mmpos.utils.cli import exit_on_bad_input
from mmpos.utils.config_check import blame_config
from mmpos.utils.launch import (LaunchError, build_runner,
                                check_checkpoint_paths, check_work_dir,
                                finish_launch_config, launcher_parser,
                                load_launch_config, parse_common,
                                remove_partial_output, resume_checkpoint,
                                work_dir_lock)


def parse_args(argv=None):
    parser = launcher_parser('Train a model', 'where logs and checkpoints go',
                             'train/val')
    parser.add_argument(
        '--resume',
        nargs='?',
        const='auto',
        help='resume from CKPT, or without a value from the latest '
        'checkpoint in the work dir')
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
    return parse_common(parser, argv)


def build_train_config(args):
    cfg = load_launch_config(args)

    check_work_dir(cfg.work_dir, resume=args.resume is not None)
    if args.resume == 'auto':
        cfg.resume, cfg.load_from = True, resume_checkpoint(cfg.work_dir)
    elif args.resume is not None:
        cfg.resume, cfg.load_from = True, args.resume
    check_checkpoint_paths(cfg, '--resume checkpoint' if args.resume
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
    return finish_launch_config(cfg, args, ('train', 'val'), args.bad_images)


def checkpoint_fit_hook(cfg, args):
    """The checkpoint the runner will load, checked against the model:
    strictly when resuming, leniently for ``load_from`` (fine-tuning)."""
    return CheckpointFitHook(cfg.get('load_from'),
                             strict=args.resume is not None)


def main(argv=None):
    args = parse_args(argv)
    use_safe_io()  # safe checkpoint reads, atomic writes (mmpos.checkpoint)
    runner = None

    def trained():
        return runner is not None and \
            runner.message_hub.get_info('iter', 0) > 0

    with exit_on_bad_input('train.py', (NonFiniteLossError, )):
        cfg = build_train_config(args)
        with work_dir_lock(cfg.work_dir) as existed, \
                remove_partial_output(cfg.work_dir, trained, existed), \
                blame_config(cfg, args.cfg_options):
            runner = build_runner(cfg, checkpoint_fit_hook(cfg, args))
            runner.train()
    # A process group left for the interpreter's exit to tear down can abort
    # a rank ("terminate called without an active exception", seen with 2
    # gloo processes on a loaded CPU); release it once training is done.
    if torch.distributed.is_available() and \
            torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == '__main__':
    main()
