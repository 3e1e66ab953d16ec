"""Scalar logs of an mmengine work dir: every (re)start's ``scalars.json``
in time order, a killed job's truncated last line ignored, a broken line
before it refused naming file and line, training and validation records
told apart."""
import json

import pytest

from mmpos.analysis.logs import (is_train_record, is_val_record, load_scalars,
                                 scalar_files, timestamp_dirs,
                                 training_records)

TRAIN = {'lr': 1e-3, 'loss': 1.0, 'step': 10}
VAL = {'coco/bbox_mAP': 0.42, 'step': 10}


def write_log(work_dir, stamp, records, tail=''):
    path = work_dir / stamp / 'vis_data' / 'scalars.json'
    path.parent.mkdir(parents=True)
    path.write_text(''.join(json.dumps(r) + '\n' for r in records) + tail)
    return path


def test_records_told_apart():
    assert is_train_record(TRAIN) and not is_val_record(TRAIN)
    assert is_train_record({'loss_cls': 0.5, 'step': 1})
    assert is_val_record(VAL) and not is_train_record(VAL)
    # bookkeeping only (e.g. a time record of the test loop): neither
    bookkeeping = {'time': 0.1, 'data_time': 0.01, 'step': 3}
    assert not is_train_record(bookkeeping)
    assert not is_val_record(bookkeeping)


def test_truncated_last_line_ignored_and_broken_line_refused(tmp_path):
    path = write_log(tmp_path, '20240101_000000', [TRAIN, VAL],
                     tail='\n{"lr": 0.1, "lo')
    assert load_scalars(str(path)) == [TRAIN, VAL]
    path.write_text(json.dumps(TRAIN) + '\n{"lr": \n' + json.dumps(VAL) + '\n')
    with pytest.raises(ValueError, match=f'{path}:2: not a json record'):
        load_scalars(str(path))


def test_restarts_read_in_time_order(tmp_path):
    later = dict(TRAIN, step=20)
    write_log(tmp_path, '20240102_000000', [later])
    write_log(tmp_path, '20240101_120000', [TRAIN, VAL])
    (tmp_path / '20240103_000000').mkdir()  # started, nothing logged yet
    (tmp_path / 'not_a_stamp').mkdir()
    (tmp_path / 'best_ckpt_1').mkdir()
    assert [d.rsplit('/', 1)[1] for d in timestamp_dirs(str(tmp_path))] == [
        '20240101_120000', '20240102_000000', '20240103_000000']
    assert [f.split('/')[-3] for f in scalar_files(str(tmp_path))] == [
        '20240101_120000', '20240102_000000']
    assert training_records(str(tmp_path)) == [TRAIN, later]
    assert scalar_files(str(tmp_path / 'missing')) == []
