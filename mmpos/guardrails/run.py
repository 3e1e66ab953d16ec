"""The one call of ``tools/train.py`` and ``tools/test.py``: :func:`prepare`.

::

    with prepare(args.config, args, 'train') as run:
        run.build().train()

turns the config path and the parsed command line into a checked, ready
config (:func:`ready_config`) and holds what the run needs around it:

* bad input (:data:`~mmpos.guardrails.cli.USER_ERRORS`, a non-finite loss)
  is one line ``train.py: error: ...`` with exit status 1
  (:func:`~mmpos.guardrails.cli.exit_on_bad_input`);
* a CPU process group for distributed runs without CUDA, released at the
  end;
* the work dir's lock; a run that fails before its first iteration removes
  what it wrote, and only that (:func:`~.launch.work_dir_lock`);
* a ``type`` no registry holds or a value a constructor rejects while the
  runner builds is one line (:func:`~.config_check.blame_config`);
* training: ``SIGTERM`` / ``SIGUSR1`` save a checkpoint and exit with
  status 75 (:class:`~mmpos.engine.hooks.PreemptionHook`), and a rank whose
  process ended is named in one line (:func:`~.launch.lost_rank`).
"""
import contextlib
import copy
import gc
import logging
import os
import sys

import torch
import torch.distributed as torch_dist
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

from mmpos.checkpoint import use_safe_io
from mmpos.engine.hooks import (PREEMPTED_EXIT_CODE, CheckpointFitHook,
                                NonFiniteLossError, Preempted, PreemptionHook)
from .cli import exit_on_bad_input
from .config_check import blame_config
from .data_check import check_config_datasets
from mmpos.errors import LaunchError
from .launch import (apply_launch_arguments,
                     check_checkpoint_paths, check_work_dir, global_rank,
                     load_config, lost_rank, quiet_console, rank_processes,
                     resume_checkpoint, start_cpu_process_group,
                     use_safe_image_loading, work_dir_lock)

TOOLS = ('train', 'test')


def _train_options(cfg, args) -> None:
    """``--resume [CKPT]``, ``--auto-resume``, ``--amp``,
    ``--auto-scale-lr`` and ``--bad-images`` of ``tools/train.py``."""
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
    log_short_runs(cfg)


# Loss lines a run shorter than its logger interval prints instead of none
SHORT_RUN_LOG_LINES = 10


def log_short_runs(cfg) -> None:
    """Let an iteration-based run shorter than its logger interval
    (``train_cfg.max_iters=4`` with a logger every 10 iterations prints no
    loss) log every ``max_iters // 10`` iterations (at least every one).

    Changes this run's ``cfg`` only, at run time: the configs resolve to
    what they did."""
    logger = (cfg.get('default_hooks') or {}).get('logger')
    train_cfg = cfg.get('train_cfg') or {}
    max_iters = train_cfg.get('max_iters')
    if not isinstance(logger, dict) or not isinstance(max_iters, int) or \
            train_cfg.get('by_epoch'):
        return
    if max_iters < logger.get('interval', 10):
        logger.interval = max(1, max_iters // SHORT_RUN_LOG_LINES)


def _test_options(cfg, args) -> None:
    """The checkpoint and ``--tta`` of ``tools/test.py``."""
    check_work_dir(cfg.work_dir)  # not one a training run is using
    cfg.load_from = args.checkpoint
    check_checkpoint_paths(cfg, 'checkpoint')
    if args.tta:
        missing = [k for k in ('tta_model', 'tta_pipeline')
                   if not cfg.get(k)]
        if missing:
            raise LaunchError(
                f'--tta: the config defines no {" / ".join(missing)} (mmseg '
                'configs get them from their dataset and runtime bases)')
        cfg.test_dataloader.dataset.pipeline = cfg.tta_pipeline
        cfg.model = dict(**cfg.tta_model, module=cfg.model)
    use_safe_image_loading(cfg)


def ready_config(config: str, args, tool: str = 'train'):
    """The config at path ``config`` read with ``args.cfg_options``
    (:func:`~.launch.load_config`: misspelled keys refused) and the
    command line of ``tools/<tool>.py`` applied and checked: launch options
    and work dir (:func:`~.launch.apply_launch_arguments`), resume and the
    checkpoints the config names, amp, auto-scale-lr, safe image loading,
    and (on rank 0, unless ``--skip-data-check``) the datasets the run
    reads (:func:`~.data_check.check_config_datasets`: the annotation
    files and a fixed sample of 32 label maps per dataset).

    Raises:
        BadInputError: the first problem found, in one line.
    """
    if tool not in TOOLS:
        raise ValueError(f'tool must be one of {TOOLS}, got {tool!r}')
    cfg = load_config(config, args.cfg_options)
    apply_launch_arguments(cfg, args)
    (_train_options if tool == 'train' else _test_options)(cfg, args)
    if not args.skip_data_check and global_rank() == 0:
        check_config_datasets(cfg, ('train', 'val') if tool == 'train' else
                              ('test', ))
    return cfg


class Run:
    """What :func:`prepare` yields: the ready ``cfg`` and :meth:`build`."""

    def __init__(self, cfg, tool: str, quiet: bool = False):
        self.cfg, self.tool, self.quiet = cfg, tool, quiet
        self.runner, self.processes = None, []

    def build(self) -> Runner:
        """The runner of ``cfg`` (``runner_type`` or mmengine's), checking
        that the checkpoint it loads fits the model
        (:class:`~mmpos.engine.hooks.CheckpointFitHook`: every model tensor
        when resuming or testing, at least one when fine-tuning), saving on
        preemption when training, with no line per parameter on the
        console; ``quiet``: without mmengine's environment, config and hook
        dumps (the config is still written to the work dir)."""
        cfg = self.cfg
        if self.quiet:
            cfg = copy.deepcopy(cfg)
            cfg.log_level = 'WARNING'  # while the runner is built
        self.runner = (RUNNERS.build(cfg) if 'runner_type' in cfg else
                       Runner.from_cfg(cfg))
        if self.quiet:
            self._speak_again()
        cfg = self.cfg
        strict = self.tool == 'test' or bool(cfg.get('resume'))
        self.runner.register_hook(
            CheckpointFitHook(cfg.get('load_from'), strict=strict))
        if self.tool == 'train':
            self.runner.register_hook(PreemptionHook())
        self.processes = rank_processes()
        quiet_console(self.runner.logger)
        return self.runner

    def _speak_again(self) -> None:
        """After a quiet build: the handlers log at the config's level again
        and the work dir's copy of the config is the one given."""
        level = self.cfg.get('log_level', 'INFO')
        for handler in self.runner.logger.handlers:
            if handler.level == logging.WARNING:
                handler.setLevel(level)
        self.runner.cfg = copy.deepcopy(self.cfg)
        self.runner.dump_config()

    def trained(self) -> bool:
        """Whether a step was taken or a checkpoint saved (then a failure
        keeps the work dir's new entries)."""
        hub = self.runner.message_hub if self.runner is not None else None
        return hub is not None and (hub.get_info('iter', 0) > 0 or
                                    hub.get_info('last_ckpt') is not None)


@contextlib.contextmanager
def prepare(config: str, args, tool: str = 'train'):
    """Run ``tools/<tool>.py`` (``'train'`` or ``'test'``) on the config at
    ``config`` with the parsed command line ``args``: see the module
    docstring.

    Yields:
        Run: ``run.cfg`` (:func:`ready_config`) and ``run.build()``.
    """
    prog = f'{tool}.py'
    use_safe_io()  # safe checkpoint reads, atomic writes (mmpos.checkpoint)
    status = 0
    with exit_on_bad_input(prog, (NonFiniteLossError, )):
        cfg = ready_config(config, args, tool)
        start_cpu_process_group(cfg, args.launcher)
        run = Run(cfg, tool, quiet=args.quiet)
        try:
            with work_dir_lock(cfg.work_dir, keep_output=run.trained), \
                    blame_config(cfg):
                yield run
        except Preempted as stop:
            if global_rank() == 0:
                print(f'{prog}: {stop}', file=sys.stderr, flush=True)
            status = PREEMPTED_EXIT_CODE
        except RuntimeError as err:  # a collective whose peer has died
            message = lost_rank(err, run.processes)
            if message is None or os.environ.get('MMPOS_DEBUG'):
                raise
            sys.exit(f'{prog}: error: {message}')
    # What is left for the interpreter's exit to tear down can abort a rank
    # ("terminate called without an active exception", seen with 2 gloo
    # processes on a loaded CPU): the runner holds the model, its FSDP / DDP
    # wrappers and their collectives' work objects in reference cycles that
    # outlive the run, so they are collected here, while the interpreter is
    # whole. A rank that closes its connections while a peer still completes
    # the last collective can abort it too: every rank meets at a barrier,
    # then releases the process group.
    if torch_dist.is_available() and torch_dist.is_initialized():
        run.runner = None
        gc.collect()
        if not status:
            torch_dist.barrier()
        torch_dist.destroy_process_group()
    if status:
        sys.exit(status)


__all__ = ['Run', 'prepare', 'ready_config']
