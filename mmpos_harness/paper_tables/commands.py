"""Commands that (re)launch the missing runs of a manifest, resumably.

Each run is planned in dependency order (``init_from`` / ``test_of`` first)
as one of

* ``done``: a training run with the done marker, or a test run with its
  ``metrics.json``; skipped;
* ``blocked``: its config is pending, or a run it depends on is blocked;
* ``resume``: the work dir holds a checkpoint -> ``--resume``;
* ``start``: a fresh run.

A training run started from another gets
``model.backbone.init_cfg=dict(type='Pretrained', checkpoint=<that run's last
checkpoint>, prefix='backbone.')`` through ``--cfg-options`` (``init_mode: full``:
``load_from=<checkpoint>``, the whole model); a test run
evaluates its ``test_of`` run's last checkpoint with ``tools/test.py --out
<work dir>/metrics.json``. Checkpoints of runs not finished at planning time
are read when the command runs (``$(cat <work dir>/last_checkpoint)``).
"""
import os.path as osp
import shlex
from dataclasses import dataclass
from typing import Dict, List, Optional

from ..results import DONE_MARKER, last_checkpoint
from .manifest import Manifest, Run


@dataclass
class Step:
    run: Run
    action: str  # 'done' | 'blocked' | 'resume' | 'start'
    reason: str = ''
    command: Optional[List[str]] = None


def _option(key: str, value) -> str:
    if isinstance(value, bool):
        value = str(value)
    elif isinstance(value, (list, tuple)):
        value = '[' + ','.join(map(str, value)) + ']'
    return f'{key}={value}'


def select_runs(manifest: Manifest, run_ids: List[str]) -> List[Run]:
    """``run_ids`` and everything they depend on, dependencies first."""
    order, seen = [], set()

    def visit(run_id):
        if run_id not in manifest.runs:
            raise KeyError(f'unknown run {run_id!r}')
        if run_id in seen:
            return
        seen.add(run_id)
        run = manifest.runs[run_id]
        for dep in (run.init_from, run.test_of):
            if dep:
                visit(dep)
        order.append(run)

    for run_id in run_ids:
        visit(run_id)
    return order


def is_done(run: Run, work_dir: str) -> bool:
    name = 'metrics.json' if run.test_of else DONE_MARKER
    return osp.isfile(osp.join(work_dir, name))


def checkpoint_ref(work_dir: str) -> str:
    """The checkpoint path now, or a shell expression reading it later."""
    ckpt = last_checkpoint(work_dir)
    return ckpt if ckpt else f'$(cat {shlex.quote(work_dir)}/last_checkpoint)'


def plan(manifest: Manifest, run_ids: List[str], work_root: str,
         launcher: str = 'local', python: str = 'python',
         partition: str = 'PARTITION') -> List[Step]:
    """Steps for ``run_ids`` and their dependencies (see module doc)."""
    steps: Dict[str, Step] = {}
    for run in select_runs(manifest, run_ids):
        wd = osp.join(work_root, run.id)
        deps = [d for d in (run.init_from, run.test_of) if d]
        blocked = [d for d in deps if steps[d].action == 'blocked']
        if is_done(run, wd):
            steps[run.id] = Step(run, 'done')
            continue
        if not manifest.config_exists(run.config):
            steps[run.id] = Step(run, 'blocked',
                                 f'config {run.config} is pending')
            continue
        if blocked:
            steps[run.id] = Step(run, 'blocked',
                                 f'needs blocked run {blocked[0]}')
            continue
        config = manifest.config_path(run.config)
        options = [_option(k, v) for k, v in run.cfg_options.items()]
        if run.test_of:
            ckpt = checkpoint_ref(osp.join(work_root, run.test_of))
            args = [config, ckpt, '--work-dir', wd, '--out',
                    osp.join(wd, 'metrics.json')]
            args += ['--tta'] if run.tta else []
            action = 'start'
        else:
            if run.init_from and run.init_mode == 'full':
                ckpt = checkpoint_ref(osp.join(work_root, run.init_from))
                options.append(f'load_from={ckpt}')
            elif run.init_from:
                ckpt = checkpoint_ref(osp.join(work_root, run.init_from))
                options += [
                    'model.backbone.init_cfg.type=Pretrained',
                    f'model.backbone.init_cfg.checkpoint={ckpt}',
                    'model.backbone.init_cfg.prefix=backbone.'
                ]
            action = 'resume' if last_checkpoint(wd) else 'start'
            args = [config, '--work-dir', wd]
            args += ['--resume'] if action == 'resume' else []
        if options:
            args += ['--cfg-options', *options]
        tool = 'test' if run.test_of else 'train'
        if launcher == 'local':
            command = [python, f'tools/{tool}.py', *args]
        elif launcher == 'dist':
            command = ['bash', f'tools/dist_{tool}.sh', args[0],
                       *(args[1:2] if run.test_of else []), str(run.gpus),
                       *args[(2 if run.test_of else 1):]]
        elif launcher == 'slurm':
            if run.test_of:
                command = ['bash', 'tools/dist_test.sh', args[0], args[1],
                           str(run.gpus), *args[2:]]
            else:
                command = [f'GPUS={run.gpus}', 'bash', 'tools/slurm_train.sh',
                           partition, run.id, args[0], wd, *args[3:]]
        else:
            raise ValueError(f'launcher must be local, dist or slurm, got '
                             f'{launcher!r}')
        steps[run.id] = Step(run, action, command=command)
    return list(steps.values())


def shell_line(step: Step, work_root: str) -> str:
    """One shell line; a training run touches its done marker on success.
    Arguments holding a ``$(cat ...)`` checkpoint reference are double-quoted
    so that the shell expands them when the line runs."""
    parts = [f'"{p}"' if '$(cat ' in p else
             p if p.startswith('GPUS=') else shlex.quote(p)
             for p in step.command]
    line = ' '.join(parts)
    if not step.run.test_of:
        line += ' && touch ' + shlex.quote(
            osp.join(work_root, step.run.id, DONE_MARKER))
    return line
