"""Launch the runs a manifest's tables still miss, resumably.

    python tools/paper_tables/run.py [MANIFEST] [--work-root DIR]
        [--tables ID ...] [--runs ID ...] [--launcher local|dist|slurm]
        [--partition P] [--dry-run]

Plans the selected runs (default: every run the selected tables use) and
their dependencies: finished runs are skipped (done marker / test
metrics.json), unfinished ones resume from their last checkpoint
(``--resume``), runs whose config is still pending are reported as blocked.
``local`` runs tools/train.py / tools/test.py here one after the other,
``dist`` runs tools/dist_train.sh / dist_test.sh with the run's ``gpus``;
``slurm`` only prints tools/slurm_train.sh lines (in dependency order; each
srun blocks, so the printed script can be submitted as is). ``--dry-run``
prints the plan. Run it again after an interruption: it continues.
"""
import argparse
import os
import os.path as osp
import subprocess
import sys

from mmpos.guardrails.cli import cli_main
from mmpos_harness.paper_tables.commands import plan, shell_line
from mmpos_harness.paper_tables.manifest import ManifestError, load_manifest

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('manifest', nargs='?',
                        default='tools/paper_tables/manifest.yaml')
    parser.add_argument('--work-root', default='work_dirs/paper_tables')
    parser.add_argument('--tables', nargs='+')
    parser.add_argument('--runs', nargs='+')
    parser.add_argument('--launcher', default='local',
                        choices=['local', 'dist', 'slurm'])
    parser.add_argument('--partition', default='PARTITION')
    parser.add_argument('--python', default=sys.executable)
    parser.add_argument('--dry-run', action='store_true')
    return parser.parse_args(argv)


@cli_main('run.py')
def main(argv=None):
    args = parse_args(argv)
    try:
        manifest = load_manifest(args.manifest)
        if args.runs:
            run_ids = args.runs
        else:
            tables = ([manifest.table(t) for t in args.tables]
                      if args.tables else manifest.tables)
            run_ids = list(dict.fromkeys(
                r for t in tables for row in t.rows for r in row.runs.values()))
        work_root = osp.abspath(args.work_root)
        steps = plan(manifest, run_ids, work_root, args.launcher,
                     args.python, args.partition)
    except (ManifestError, KeyError, ValueError) as err:
        sys.exit(f'run.py: error: {err}')
    todo = [s for s in steps if s.action in ('start', 'resume')]
    for step in steps:
        note = f' ({step.reason})' if step.reason else ''
        print(f'# {step.action:7s} {step.run.id}{note}', file=sys.stderr)
    if args.dry_run or args.launcher == 'slurm':
        for step in todo:
            print(shell_line(step, work_root))
        return
    for step in todo:
        os.makedirs(osp.join(work_root, step.run.id), exist_ok=True)
        line = shell_line(step, work_root)
        print(f'+ {line}', flush=True)
        if subprocess.run(line, shell=True, cwd=ROOT).returncode:
            sys.exit(f'run.py: {step.run.id} failed; fix it and run '
                     'run.py again (finished runs are skipped, this one '
                     'resumes)')
    blocked = sum(s.action == 'blocked' for s in steps)
    print(f'{len(todo)} run(s) launched, {blocked} blocked', file=sys.stderr)


if __name__ == '__main__':
    main()
