"""The atomic writer: the mode a plain open() gives (issue 27: files were
0600 whatever the umask), no partial file when a write fails."""
import errno
import os
import stat

import pytest
import torch

import mmpos.checkpoint.write as checkpoint_write
from mmpos.checkpoint import (read_state_dict, save_state_dict,
                              write_atomically)


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize('umask', [0o022, 0o077, 0o002])
def test_files_get_the_mode_of_a_plain_open(tmp_path, umask):
    old = os.umask(umask)
    try:
        with open(tmp_path / 'plain', 'wb') as f:
            f.write(b'x')
        write_atomically(b'x', tmp_path / 'atomic')
        save_state_dict({'w': torch.ones(2)}, str(tmp_path / 'c.pth'))
    finally:
        os.umask(old)
    assert mode(tmp_path / 'plain') == 0o666 & ~umask
    assert mode(tmp_path / 'atomic') == mode(tmp_path / 'plain')
    assert mode(tmp_path / 'c.pth') == mode(tmp_path / 'plain')


def test_a_failed_write_keeps_the_old_file_and_leaves_nothing(
        tmp_path, monkeypatch):
    path = tmp_path / 'c.pth'
    save_state_dict({'w': torch.ones(2)}, str(path))
    before = path.read_bytes()

    def full_disk(fd):
        raise OSError(errno.ENOSPC, 'No space left on device')

    monkeypatch.setattr(checkpoint_write.os, 'fsync', full_disk)
    with pytest.raises(OSError, match='No space left'):
        save_state_dict({'w': torch.zeros(2)}, str(path), force=True)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ['c.pth']


def test_save_state_dict_refuses_to_overwrite(tmp_path):
    path = tmp_path / 'c.pth'
    save_state_dict({'w': torch.ones(2)}, str(path), meta=dict(a=1))
    with pytest.raises(FileExistsError, match='exists; pass --force'):
        save_state_dict({'w': torch.zeros(2)}, str(path))
    assert torch.equal(read_state_dict(path)['w'], torch.ones(2))
    assert torch.load(path, weights_only=True)['meta'] == dict(a=1)


def test_atomic_path_for_writers_that_take_a_name(tmp_path):
    old = os.umask(0o027)
    try:
        with checkpoint_write.atomic_path(tmp_path / 'm.onnx') as tmp:
            assert not os.path.exists(tmp_path / 'm.onnx')
            with open(tmp, 'wb') as f:
                f.write(b'graph')
        with pytest.raises(RuntimeError, match='export failed'):
            with checkpoint_write.atomic_path(tmp_path / 'm.onnx') as tmp:
                with open(tmp, 'wb') as f:
                    f.write(b'half')
                raise RuntimeError('export failed')
    finally:
        os.umask(old)
    assert (tmp_path / 'm.onnx').read_bytes() == b'graph'
    assert mode(tmp_path / 'm.onnx') == 0o640
    assert os.listdir(tmp_path) == ['m.onnx']
