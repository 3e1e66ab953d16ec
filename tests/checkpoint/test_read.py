"""The safe reader: weights_only=True where the format allows, mmengine's
own training checkpoints, arbitrary objects refused, and each unreadable
path its own one-line error, found before anything is unpickled."""
import argparse
import pickle

import pytest
import torch
from mmengine.logging import HistoryBuffer, MessageHub

from mmpos.checkpoint import checkpoint_problem, read_checkpoint, read_state_dict, state_dict_of
from mmpos.errors import CheckpointReadError, UnsafeCheckpointError


class NotAllowed:
    """A class no checkpoint of ours pickles."""


def test_plain_state_dict(tmp_path):
    path = tmp_path / 'sd.pth'
    torch.save({'w': torch.arange(3.)}, path)
    loaded = read_checkpoint(str(path))
    assert torch.equal(loaded['w'], torch.arange(3.))


def test_authors_checkpoint_with_argparse_namespace(tmp_path):
    """The DeiT/RoPE-ViT training scripts store their args."""
    path = tmp_path / 'rope.pth'
    torch.save(
        dict(model={'w': torch.ones(2)}, args=argparse.Namespace(lr=4e-3)),
        path)
    loaded = read_checkpoint(path)
    assert loaded['args'].lr == 4e-3
    assert torch.equal(read_state_dict(path)['w'], torch.ones(2))


def test_mmengine_training_checkpoint(tmp_path):
    hub = MessageHub.get_instance('test_checkpoint_read')
    hub.update_scalar('train/loss', 1.5)
    hub.update_scalar('train/loss', 0.5)
    path = tmp_path / 'iter_2.pth'
    torch.save(
        {
            'state_dict': {
                'w': torch.ones(2)
            },
            'message_hub': hub.state_dict()
        }, path)
    loaded = read_checkpoint(str(path))
    buffer = loaded['message_hub']['log_scalars']['train/loss']
    assert isinstance(buffer, HistoryBuffer)
    assert buffer.mean() == 1.0


def test_arbitrary_objects_are_refused(tmp_path):
    path = tmp_path / 'evil.pth'
    torch.save({'obj': NotAllowed()}, path)
    with pytest.raises(UnsafeCheckpointError, match='NotAllowed'):
        read_checkpoint(str(path))


def test_each_unreadable_path_has_its_own_line(tmp_path):
    with pytest.raises(FileNotFoundError,
                       match=f'^checkpoint not found: {tmp_path}/none.pth$'):
        read_checkpoint(str(tmp_path / 'none.pth'))
    with pytest.raises(IsADirectoryError,
                       match=f'^load_from {tmp_path} is a directory, not a '
                       'checkpoint file$'):
        read_checkpoint(str(tmp_path), what='load_from')
    empty = tmp_path / 'empty.pth'
    empty.write_bytes(b'')
    with pytest.raises(CheckpointReadError,
                       match='cannot be read: the file is empty'):
        read_checkpoint(empty)
    text = tmp_path / 'notes.pth'
    text.write_text('hello')
    with pytest.raises(CheckpointReadError,
                       match=r'not a PyTorch '
                       r"checkpoint \(starts with b'hello'"):
        read_checkpoint(text)


def test_truncation_is_found_before_unpickling(tmp_path, monkeypatch):
    """Every cut of a zip checkpoint is reported by checkpoint_problem,
    and read_checkpoint never reaches pickle for it."""
    full = tmp_path / 'full.pth'
    torch.save({'w': torch.rand(64, 64)}, full)
    data = full.read_bytes()
    cut = tmp_path / 'cut.pth'

    def no_unpickling(*args, **kwargs):
        raise AssertionError('unpickled a damaged file')

    monkeypatch.setattr(torch, 'load', no_unpickling)
    monkeypatch.setattr(pickle, 'load', no_unpickling)
    for size in (1, 100, len(data) // 2, len(data) - 1):
        cut.write_bytes(data[:size])
        assert checkpoint_problem(cut) is not None, size
        with pytest.raises(CheckpointReadError, match=f'{cut} cannot be '):
            read_checkpoint(cut)
    assert checkpoint_problem(full) is None


def test_state_dict_of_names_what_it_found():
    assert list(state_dict_of({'model': {
        'a': torch.ones(1),
        'n': 3
    }})) == ['a']
    with pytest.raises(CheckpointReadError,
                       match=r"x.pth holds a list, not a state dict"):
        state_dict_of([1], source='x.pth')
    with pytest.raises(CheckpointReadError,
                       match=r"holds a dict with keys \['epoch', 'meta'\]"):
        state_dict_of({'epoch': 1, 'meta': {}}, ('state_dict', ))


def test_tools_say_directory_not_missing(tmp_path):
    """issue 27: a directory passed as a checkpoint was 'not found'."""
    from mmengine.config import Config

    from mmpos.guardrails.launch import check_checkpoint_paths
    cfg = Config(
        dict(load_from=str(tmp_path),
             model=dict(backbone=dict(
                 init_cfg=dict(type='Pretrained', checkpoint=str(tmp_path))))))
    with pytest.raises(IsADirectoryError,
                       match=f'^load_from checkpoint {tmp_path} is a '
                       'directory, not a checkpoint file$'):
        check_checkpoint_paths(cfg)
    cfg.load_from = None
    with pytest.raises(IsADirectoryError,
                       match='^model.backbone.init_cfg.checkpoint: pretrained '
                       f'checkpoint {tmp_path} is a directory'):
        check_checkpoint_paths(cfg)
