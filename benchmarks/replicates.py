"""Replicates of a benchmark as its committed design fixes them (issue 55,
item 6).

A run's interval covers the scatter between its rounds, not between runs
(``docs/notes/benchmarks.md``). A *benchmark design*,
``designs/benchmarks/<benchmark>.yaml``, fixes before any run what is
measured (the estimand: device, threads, autocast, sizes, rounds), the
bounds tested and the replicate protocol. This script reads it and runs
``benchmarks/run.py`` once per replicate of each arm, each in a process of
its own, the runs of all arms in one order shuffled with the design's
``order_seed``, ``pause_s`` idle seconds between two processes: the
replicates sample the machine's state over time, and the arms share it.
A design with uncommitted changes is refused (``--dry-run`` aside), and
each run records it (``run.py --design``: in its settings and its
``depends``).

A design file (YAML)::

    benchmark: cpu_position_schemes   # the file's name; the runs' prefix
    only: position_schemes            # the benchmark (run.py --only)
    question: one sentence
    estimand: {device: cpu, threads: 1, amp: 'off', batch_size: 8,
               iters: 30, warmup: 2,  # run.py's options
               width: 384, heads: 6, grid: [14, 14]}  # the module's sizes
    arms: {reuse: {malloc: reuse}, system: {malloc: system}}
    confirm: reuse                    # the arm whose verdicts confirm
    bounds: {comrope: '<= 1.5', liere: '<= 1.5'}   # the module's TARGETS
    replicates: 10                    # processes per arm, at least 10
    order_seed: 55
    pause_s: 90

The estimand's sizes other than run.py's options (``width`` ...) must be
the benchmark module's constants of that name in capitals, and ``bounds``
its ``TARGETS``: the design says what the code measures, or is refused.
Replicate ``k`` of arm ``a`` is written as
``<out>/<benchmark>_<a>_r<k>.json`` / ``.md`` (``k`` from 01; an existing
file is refused, not overwritten). The runs of an arm are one command but
for ``--name``: the benchmarks page takes them as its replicates (between
runs) and scopes their verdicts to what ran them ("met on <CPU>, torch
<version>").

    python benchmarks/replicates.py designs/benchmarks/cpu_position_schemes.yaml
        [--dry-run] [--out DIR]

``--dry-run`` prints the commands in their order and the expected duration
(from the stored runs of the same benchmark) and runs nothing.
"""
import argparse
import glob
import importlib
import json
import os.path as osp
import random
import statistics
import subprocess
import sys
import time
from typing import Callable, List, Optional

import yaml

from mmpos.errors import BadInputError
from mmpos.guardrails.cli import cli_main

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
DEFAULT_OUT = osp.join(ROOT, 'benchmarks', 'results')
KEYS = {'benchmark', 'only', 'question', 'estimand', 'arms', 'confirm',
        'bounds', 'replicates', 'order_seed', 'pause_s'}
#: the estimand's keys that are run.py options (the others: the module's
#: constants)
OPTIONS = {'device': '--device', 'threads': '--threads', 'amp': '--amp',
           'batch_size': '--batch-size', 'iters': '--iters',
           'warmup': '--warmup'}
ARM_OPTIONS = {'malloc': '--malloc'}
MIN_REPLICATES = 10


def _int(path: str, key: str, value, least: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) \
            or value < least:
        raise BadInputError(f'{path}: {key} must be an integer >= {least}, '
                            f'got {value!r}')
    return value


def load(path: str) -> dict:
    """The benchmark design in ``path``, checked (one
    :class:`~mmpos.errors.BadInputError` line naming the file and the key)
    against the schema above and the benchmark module it measures."""
    if not osp.isfile(path):
        raise BadInputError(f'{path}: no such benchmark design')
    with open(path) as f:
        design = yaml.safe_load(f)
    if not isinstance(design, dict):
        raise BadInputError(f'{path}: a benchmark design is a mapping')
    unknown, missing = sorted(set(design) - KEYS), sorted(KEYS - set(design))
    if unknown:
        raise BadInputError(f'{path}: unknown key {unknown[0]!r}; allowed: '
                            f'{sorted(KEYS)}')
    if missing:
        raise BadInputError(f'{path}: missing key {missing[0]!r}')
    name = osp.splitext(osp.basename(path))[0]
    if design['benchmark'] != name:
        raise BadInputError(f'{path}: benchmark is {design["benchmark"]!r}, '
                            f'the file is named {name!r}')
    _int(path, 'replicates', design['replicates'], MIN_REPLICATES)
    _int(path, 'order_seed', design['order_seed'], 0)
    pause = design['pause_s']
    if not isinstance(pause, (int, float)) or isinstance(pause, bool) \
            or pause < 0:
        raise BadInputError(f'{path}: pause_s must be a number of seconds '
                            f'>= 0, got {pause!r}')
    arms = design['arms']
    if not isinstance(arms, dict) or not arms:
        raise BadInputError(f'{path}: arms must map each arm to its run.py '
                            'options')
    for arm, options in arms.items():
        if not isinstance(options, dict) or set(options) - set(ARM_OPTIONS):
            raise BadInputError(f'{path}: arms.{arm} must map options of '
                                f'{sorted(ARM_OPTIONS)} to values, got '
                                f'{options!r}')
    if design['confirm'] not in arms:
        raise BadInputError(f'{path}: confirm {design["confirm"]!r} is not '
                            f'one of the arms {sorted(arms)}')
    _against_module(path, design)
    return design


def _against_module(path: str, design: dict) -> None:
    """Refuse a design whose benchmark, sizes or bounds are not what its
    module measures and tests."""
    # run.py and the benchmark modules sit beside this script, the first
    # entry of sys.path when it runs
    bench = importlib.import_module('run')
    if design['only'] not in bench.BENCHMARKS:
        raise BadInputError(f'{path}: only {design["only"]!r} is not a '
                            f'benchmark of run.py: '
                            f'{sorted(bench.BENCHMARKS)}')
    module = importlib.import_module(bench.BENCHMARKS[design['only']])
    estimand = design['estimand']
    if not isinstance(estimand, dict):
        raise BadInputError(f'{path}: estimand must be a mapping')
    for key, value in estimand.items():
        if key in OPTIONS:
            continue
        constant = getattr(module, key.upper(), None)
        if constant is None:
            raise BadInputError(
                f'{path}: estimand.{key}: neither a run.py option '
                f'({sorted(OPTIONS)}) nor a constant {key.upper()} of '
                f'benchmarks/{module.__name__}.py')
        if (list(constant) if isinstance(constant, tuple) else
                constant) != value:
            raise BadInputError(
                f'{path}: estimand.{key} is {value!r}, '
                f'benchmarks/{module.__name__}.py measures {constant!r}')
    targets = getattr(module, 'TARGETS', {})
    if design['bounds'] != targets:
        raise BadInputError(
            f'{path}: bounds {design["bounds"]!r} are not what '
            f'benchmarks/{module.__name__}.py tests (TARGETS {targets!r})')


def run_name(design: dict, arm: str, k: int) -> str:
    """The ``--name`` of replicate ``k`` (from 1) of ``arm``."""
    return f'{design["benchmark"]}_{arm}_r{k:02d}'


def schedule(design: dict) -> List[tuple]:
    """``(arm, k)`` of every run, in the order they run: every arm's
    ``replicates`` runs shuffled together with ``order_seed``."""
    runs = [(arm, k) for arm in design['arms']
            for k in range(1, design['replicates'] + 1)]
    random.Random(design['order_seed']).shuffle(runs)
    return runs


def command(design: dict, design_path: str, arm: str, k: int,
            out: Optional[str] = None) -> List[str]:
    """``run.py``'s command line for replicate ``k`` of ``arm``: the
    estimand's options, the arm's, the design and the run's name."""
    cmd = ['python', 'benchmarks/run.py', '--only', design['only']]
    for key, value in design['estimand'].items():
        if key in OPTIONS:
            cmd += [OPTIONS[key], str(value)]
    for key, value in design['arms'][arm].items():
        cmd += [ARM_OPTIONS[key], str(value)]
    cmd += ['--design', design_path, '--name', run_name(design, arm, k)]
    return cmd + (['--out', out] if out else [])


def run_seconds(design: dict, out: str) -> Optional[float]:
    """The median wall time of the stored full-size runs of the design's
    benchmark in ``out`` (their ``settings.total_s``), or None."""
    found = []
    for path in glob.glob(osp.join(out, '*.json')):
        with open(path) as f:
            settings = json.load(f).get('settings', {})
        argv = settings.get('argv', [])
        only = argv[argv.index('--only') + 1:][:1] if '--only' in argv \
            else []
        if 'total_s' in settings and '--quick' not in argv and \
                only == [design['only']]:
            found.append(settings['total_s'])
    return statistics.median(found) if found else None


def committed(path: str) -> bool:
    """Whether git tracks ``path`` without uncommitted changes."""
    rel = osp.relpath(osp.abspath(path), ROOT)
    tracked = subprocess.run(['git', '-C', ROOT, 'ls-files', '--error-unmatch',
                              rel], capture_output=True).returncode == 0
    dirty = subprocess.run(['git', '-C', ROOT, 'status', '--porcelain', '--',
                            rel], capture_output=True, text=True).stdout
    return tracked and not dirty


def run(design_path: str, out: Optional[str] = None, dry_run: bool = False,
        execute: Callable[[List[str]], int] = None,
        sleep: Callable[[float], None] = time.sleep, log=print) -> int:
    """Run (or, ``dry_run``, print) the design's replicates in their order;
    returns the number of runs that failed. ``execute`` runs a command
    (default: a process in the repository with this interpreter) and
    returns its exit status."""
    design = load(design_path)
    rel = osp.relpath(osp.abspath(design_path), ROOT)
    runs = schedule(design)
    folder = out or DEFAULT_OUT
    existing = [f'{osp.join(folder, run_name(design, a, k))}.json'
                for a, k in runs if osp.exists(
                    osp.join(folder, run_name(design, a, k)) + '.json')]
    if existing and not dry_run:
        raise BadInputError(f'{existing[0]}: exists; the replicates of '
                            f'{rel} are not overwritten (move the stored '
                            'runs away or give another --out)')
    if not dry_run and not committed(design_path):
        raise BadInputError(f'{rel}: commit the design before its runs '
                            '(it fixes what they measure)')
    commands = [command(design, rel, a, k, out) for a, k in runs]
    each = run_seconds(design, folder)
    pauses = design['pause_s'] * (len(runs) - 1)
    log(f'{rel}: {len(runs)} runs ({design["replicates"]} per arm of '
        f'{", ".join(design["arms"])}), {design["pause_s"]} s apart: '
        + (f'about {(pauses + len(runs) * each) / 60:.0f} min (a stored run '
           f'of --only {design["only"]} took {each:.0f} s)' if each else
           f'{pauses / 60:.0f} min of pauses and the runs'))
    if dry_run:
        for cmd in commands:
            log(' '.join(cmd))
        return 0
    execute = execute or (lambda cmd: subprocess.run(
        [sys.executable, *cmd[1:]], cwd=ROOT).returncode)
    failed = 0
    for i, cmd in enumerate(commands):
        if i:
            sleep(design['pause_s'])
        log(f'[{i + 1}/{len(commands)}] {" ".join(cmd)}')
        if execute(cmd) != 0:
            failed += 1
            log(f'[{i + 1}/{len(commands)}] failed')
    return failed


@cli_main('replicates.py')
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('design', help='designs/benchmarks/<benchmark>.yaml')
    parser.add_argument('--out', help='output folder (default: '
                        'benchmarks/results)')
    parser.add_argument('--dry-run', action='store_true',
                        help='print the runs in their order and the '
                        'expected duration; run nothing')
    args = parser.parse_args(argv)
    failed = run(args.design, args.out, args.dry_run)
    if failed:
        print(f'{failed} run(s) failed', file=sys.stderr)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
