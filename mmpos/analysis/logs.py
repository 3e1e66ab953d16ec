"""Read the scalar logs of an mmengine work dir (finished or not).

mmengine's Runner (``tools/train.py`` / ``tools/test.py``) writes one
timestamp directory per (re)start::

    <work_dir>/<timestamp>/vis_data/scalars.json  # one json record a line
    <work_dir>/<timestamp>/<timestamp>.json       # tools/test.py metrics

so a resumed run has several; they are read in timestamp order. A *training
record* has ``lr`` or a ``loss*`` key; a *validation record* is a record
without them that has at least one value besides the bookkeeping keys
(``step``, ``iter``, ...), e.g. ``{"coco/bbox_mAP": 0.42, ..., "step": 12}``.
"""
import glob
import json
import os.path as osp
from typing import List

BOOKKEEPING = {'step', 'iter', 'epoch', 'time', 'data_time', 'memory'}


def load_scalars(path: str) -> List[dict]:
    """All json records of one ``scalars.json`` (blank lines skipped; a
    truncated last line, as left by a killed job, is ignored).

    Raises:
        ValueError: naming the file and line of a broken record before the
            last line.
    """
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
    """The ``vis_data/scalars.json`` of every (re)start, in time order."""
    files = [osp.join(d, 'vis_data', 'scalars.json')
             for d in timestamp_dirs(work_dir)]
    return [f for f in files if osp.isfile(f)]


def training_records(work_dir: str) -> List[dict]:
    """Training log records of all (re)starts, in order."""
    return [r for f in scalar_files(work_dir) for r in load_scalars(f)
            if is_train_record(r)]
