"""Status and final metrics of finished (or unfinished) mmengine work dirs.

Besides the logs of every (re)start (read by :mod:`mmpos.analysis.logs`)::

    <work_dir>/metrics.json                       # tools/test.py --out
    <work_dir>/last_checkpoint                    # path of the last ckpt
    <work_dir>/.mmpos_done                        # written by tools/paper_tables/run.py

The result of a run is the **last** validation record over all its logs
(:func:`~mmpos.analysis.logs.is_val_record`; the final evaluation), or,
when present, ``metrics.json`` written by ``tools/test.py --out`` (the
explicit test of the final checkpoint).
"""
import json
import os.path as osp
from dataclasses import dataclass, field
from typing import Dict, Optional

from mmpos.analysis.logs import is_val_record, load_scalars, timestamp_dirs

DONE_MARKER = '.mmpos_done'


@dataclass
class RunResult:
    """``status``: ``'done'`` (finished: done marker or test metrics file),
    ``'unfinished'`` (a work dir with logs but not finished; ``metrics`` is
    its last validation, maybe empty) or ``'missing'`` (no work dir)."""
    status: str
    metrics: Dict[str, float] = field(default_factory=dict)
    source: Optional[str] = None


def last_val_record(work_dir: str) -> Optional[tuple]:
    """``(record, source file)`` of the last evaluation in the work dir."""
    found = None
    for ts_dir in timestamp_dirs(work_dir):
        scalars = osp.join(ts_dir, 'vis_data', 'scalars.json')
        if osp.isfile(scalars):
            for record in load_scalars(scalars):
                if is_val_record(record):
                    found = (record, scalars)
        test_json = osp.join(ts_dir, osp.basename(ts_dir) + '.json')
        if osp.isfile(test_json):
            with open(test_json) as f:
                record = json.load(f)
            if isinstance(record, dict) and is_val_record(record):
                found = (record, test_json)
    return found


def read_run(work_dir: str, metrics_file: str = 'metrics.json') -> RunResult:
    """Status and final metrics of the run in ``work_dir``."""
    if not osp.isdir(work_dir):
        return RunResult('missing')
    explicit = osp.join(work_dir, metrics_file)
    if osp.isfile(explicit):
        with open(explicit) as f:
            metrics = json.load(f)
        if not isinstance(metrics, dict):
            raise ValueError(f'{explicit}: expected a json object')
        return RunResult('done', metrics, explicit)
    found = last_val_record(work_dir)
    metrics, source = found if found else ({}, None)
    done = osp.isfile(osp.join(work_dir, DONE_MARKER))
    return RunResult('done' if done else 'unfinished', dict(metrics), source)


def last_checkpoint(work_dir: str) -> Optional[str]:
    """Checkpoint named by mmengine's ``last_checkpoint`` file, if it
    exists (relative names are taken relative to the work dir)."""
    pointer = osp.join(work_dir, 'last_checkpoint')
    if not osp.isfile(pointer):
        return None
    with open(pointer) as f:
        path = f.read().strip()
    path = path if osp.isabs(path) else osp.join(work_dir, path)
    if osp.isfile(path):
        return path
    local = osp.join(work_dir, osp.basename(path))  # moved work dir
    return local if osp.isfile(local) else None
