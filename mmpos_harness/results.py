"""Read finished (or unfinished) mmengine work dirs.

Layout written by mmengine's Runner (``tools/train.py`` / ``tools/test.py``)::

    <work_dir>/<timestamp>/vis_data/scalars.json  # one json record a line
    <work_dir>/<timestamp>/<timestamp>.json       # tools/test.py metrics
    <work_dir>/metrics.json                       # tools/test.py --out
    <work_dir>/last_checkpoint                    # path of the last ckpt
    <work_dir>/.mmpos_done                        # written by tools/paper_tables/run.py

Every (re)start adds a timestamp directory, so a resumed run has several;
they are read in timestamp order. A *validation record* is a scalars line
without training keys (``lr``, ``loss*``) that has at least one other value,
e.g. ``{"coco/bbox_mAP": 0.42, ..., "step": 12}``; the result of a run is the
**last** validation record over all its logs (the final evaluation), or,
when present, ``metrics.json`` written by ``tools/test.py --out`` (the
explicit test of the final checkpoint).
"""
import glob
import json
import os.path as osp
from dataclasses import dataclass, field
from typing import Dict, List, Optional

DONE_MARKER = '.mmpos_done'
BOOKKEEPING = {'step', 'iter', 'epoch', 'time', 'data_time', 'memory'}


@dataclass
class RunResult:
    """``status``: ``'done'`` (finished: done marker or test metrics file),
    ``'unfinished'`` (a work dir with logs but not finished; ``metrics`` is
    its last validation, maybe empty) or ``'missing'`` (no work dir)."""
    status: str
    metrics: Dict[str, float] = field(default_factory=dict)
    source: Optional[str] = None


def load_scalars(path: str) -> List[dict]:
    """All json records of one ``scalars.json`` (blank lines skipped; a
    truncated last line, as left by a killed job, is ignored)."""
    records = []
    with open(path) as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if i != len(lines) - 1:
                raise ValueError(f'{path}:{i + 1}: not a json record')
    return records


def is_train_record(record: dict) -> bool:
    return 'lr' in record or any(k.startswith('loss') for k in record)


def is_val_record(record: dict) -> bool:
    return not is_train_record(record) and bool(set(record) - BOOKKEEPING)


def timestamp_dirs(work_dir: str) -> List[str]:
    """Timestamp subdirectories (``YYYYmmdd_HHMMSS``) in time order."""
    dirs = [
        d for d in glob.glob(osp.join(work_dir, '*_*'))
        if osp.isdir(d) and osp.basename(d).replace('_', '').isdigit()
    ]
    return sorted(dirs, key=osp.basename)


def scalar_files(work_dir: str) -> List[str]:
    files = [osp.join(d, 'vis_data', 'scalars.json')
             for d in timestamp_dirs(work_dir)]
    return [f for f in files if osp.isfile(f)]


def training_records(work_dir: str) -> List[dict]:
    """Training log records of all (re)starts, in order."""
    return [r for f in scalar_files(work_dir) for r in load_scalars(f)
            if is_train_record(r)]


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
