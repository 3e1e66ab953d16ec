"""A comparison's finished runs kept without their checkpoints, so that a
comparison spread over machines or sessions resumes from a committed
archive::

    python tools/paper_tables/archive_runs.py store WORK_DIR ARCHIVE \
        --command "python tools/paper_tables/method_ranking.py ..."
    python tools/paper_tables/archive_runs.py restore ARCHIVE WORK_DIR

``store`` archives the finished runs of a method ranking's work dir (its
stage 2; the tuning keeps its own runs, :mod:`mmpos_harness.method_ranking`)
with a provenance record of ``--command`` over the ranking's
:func:`~mmpos_harness.method_ranking.depends`; run it as the ranking goes
and commit the archive. ``restore`` on a fresh machine, then the same
ranking command, resumes it.

Layout of an archive of the comparison directory ``root``
(:mod:`.seeds`)::

    <archive>/plan.json                      # {"plan": plan.json, record}
    <archive>/<run dir relative to root>.json
        # {"files": {relative path: text}, record}

A run is one of the plan's work dirs (:func:`planned_runs`) that holds
:data:`~mmpos_harness.results.DONE_MARKER`; its archive keeps every
``*.json`` file below it (``metrics.json``, ``compute.json``,
``health.json``, ``encoder_tokens.json``, mmengine's scalars and test
records: what :func:`~.seeds.summarise` reads; not mmengine's second copy
of the scalars beside them) and the marker, byte for
byte, beside the provenance record (:func:`mmpos_harness.provenance.record`)
of the command that ran it.

:func:`restore` writes archived runs back where the work dir lacks them;
the runners (:mod:`.runs`) then skip them as finished. A pretraining run
comes back only when every transfer of it that the plan asks for is
archived: its checkpoints are not kept, so a pretraining with a transfer
still to run is run again (its seed and options are the plan's, so on the
same software the new checkpoint is the old one; the runs record the
machine). Neither function overwrites anything: an archived run is never
rewritten, a finished run in the work dir never replaced, and an archive
or a work dir whose plan differs from the other's is refused with one line.
"""
import argparse
import json
import os
import os.path as osp
import shutil
from typing import Dict, List

from mmpos.checkpoint import write_atomically
from mmpos.guardrails.cli import cli_main

from .. import provenance
from ..results import DONE_MARKER
from .seeds import PLAN, load_plan, pretrain_dir, transfer_dir, write_json


def planned_runs(root: str, plan: dict) -> Dict[str, List[str]]:
    """``{run dir: [the transfer dirs it feeds]}`` of every work dir the
    ``plan`` asks for under ``root``: each init's pretraining run (per
    pretraining seed) with its transfers, then each transfer and baseline
    run with ``[]``."""
    pseeds = plan.get('pretrain_seeds') or [None]
    out = {}
    for init in plan['inits']:
        for p in pseeds:
            out[pretrain_dir(root, init, p)] = [
                transfer_dir(root, task, init, seed, p)
                for task, spec in plan['tasks'].items()
                for seed in spec.get('seeds', plan['seeds'])]
    for feeds in list(out.values()):
        out.update((run, []) for run in feeds)
    for name, rows in (plan.get('baselines') or {}).items():
        out.update((transfer_dir(root, task, name, seed), [])
                   for task, task_seeds in rows.items()
                   for seed in task_seeds)
    return out


def _entry(archive: str, root: str, run: str) -> str:
    return osp.join(archive, osp.relpath(run, root) + '.json')


def _same_plan(path: str, kept: dict, plan: dict) -> None:
    """Refuse, naming ``path`` (where ``kept`` was read), a ``plan`` that
    is not ``kept``."""
    if kept != plan:
        changed = sorted(k for k in {*kept, *plan}
                         if kept.get(k) != plan.get(k))
        raise SystemExit(f'{path}: made for another plan (its '
                         f'{", ".join(changed)} differ); give another '
                         'archive or work dir')


def _archived_plan(archive: str) -> dict:
    with open(osp.join(archive, PLAN)) as f:
        return json.load(f)['plan']


def store(root: str, archive: str, record: dict) -> List[str]:
    """Archive every finished run of ``root``'s plan not yet in
    ``archive``, each with ``record``; returns the runs archived now."""
    plan = load_plan(root)
    if osp.isfile(osp.join(archive, PLAN)):
        _same_plan(osp.join(archive, PLAN), _archived_plan(archive), plan)
    else:
        write_json(osp.join(archive, PLAN), dict(plan=plan, **record))
    stored = []
    for run in planned_runs(root, plan):
        entry = _entry(archive, root, run)
        if osp.isfile(entry) or not osp.isfile(osp.join(run, DONE_MARKER)):
            continue
        files = {}
        for parent, _, names in os.walk(run):
            for name in names:
                if name == DONE_MARKER or name.endswith('.json') and not (
                        osp.basename(parent) == 'vis_data' and
                        name != 'scalars.json'):  # mmengine's copy of it
                    kept = osp.join(parent, name)
                    with open(kept) as f:
                        files[osp.relpath(kept, run)] = f.read()
        write_json(entry, dict(files=files, **record))
        stored.append(run)
    return stored


def restore(archive: str, root: str) -> List[str]:
    """Write the runs of ``archive`` that ``root`` has not finished into
    it (a pretraining run only when every transfer it feeds is archived);
    returns the runs restored. An unfinished run dir in the way is
    removed, as the runners would."""
    plan = _archived_plan(archive)
    if osp.isfile(osp.join(root, PLAN)):
        _same_plan(osp.join(root, PLAN), load_plan(root), plan)
    else:
        write_json(osp.join(root, PLAN), plan)
    restored = []
    for run, feeds in planned_runs(root, plan).items():
        entry = _entry(archive, root, run)
        if not osp.isfile(entry) or osp.isfile(osp.join(run, DONE_MARKER)):
            continue
        if not all(osp.isfile(_entry(archive, root, t)) for t in feeds):
            continue  # its checkpoint is needed: it runs again
        with open(entry) as f:
            files = json.load(f)['files']
        if osp.isdir(run):
            shutil.rmtree(run)
        # the marker last, so a restore killed midway leaves the run to do
        for name in sorted(files, key=lambda n: n == DONE_MARKER):
            path = osp.join(run, name)
            os.makedirs(osp.dirname(path), exist_ok=True)
            write_atomically(files[name].encode(), path)
        restored.append(run)
    return restored


@cli_main('archive_runs.py')
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    sub = parser.add_subparsers(dest='action', required=True)
    keep = sub.add_parser('store', help='archive the finished runs')
    keep.add_argument('work_dir')
    keep.add_argument('archive')
    keep.add_argument('--command', required=True,
                      help='the ranking command that ran them (recorded)')
    back = sub.add_parser('restore', help='write archived runs back')
    back.add_argument('archive')
    back.add_argument('work_dir')
    args = parser.parse_args(argv)
    if args.action == 'store':
        from ..method_ranking import depends
        done = store(args.work_dir, args.archive,
                     provenance.record(args.command, depends()))
        print(f'{len(done)} runs archived in {args.archive}')
    else:
        done = restore(args.archive, args.work_dir)
        print(f'{len(done)} runs restored into {args.work_dir}')
