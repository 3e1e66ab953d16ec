"""Local checkpoints load with weights_only=True where the format allows."""
import pytest
import torch
from mmengine.logging import HistoryBuffer, MessageHub
from mmengine.runner.checkpoint import CheckpointLoader

import mmpos  # noqa: F401  (registers the loader)
from mmpos.utils.checkpoint_io import (UnsafeCheckpointError,
                                       load_local_checkpoint)


class NotAllowed:
    """A class no checkpoint of ours pickles."""


def test_mmengine_uses_the_mmpos_loader():
    assert CheckpointLoader._get_checkpoint_loader('x.pth') is \
        load_local_checkpoint


def test_plain_state_dict(tmp_path, capsys):
    path = tmp_path / 'sd.pth'
    torch.save({'w': torch.arange(3.)}, path)
    loaded = load_local_checkpoint(str(path))
    assert torch.equal(loaded['w'], torch.arange(3.))


def test_mmengine_training_checkpoint(tmp_path):
    hub = MessageHub.get_instance('test_checkpoint_io')
    hub.update_scalar('train/loss', 1.5)
    hub.update_scalar('train/loss', 0.5)
    path = tmp_path / 'iter_2.pth'
    torch.save({'state_dict': {'w': torch.ones(2)},
                'message_hub': hub.state_dict()}, path)
    loaded = load_local_checkpoint(str(path))
    buffer = loaded['message_hub']['log_scalars']['train/loss']
    assert isinstance(buffer, HistoryBuffer)
    assert buffer.mean() == 1.0


def test_arbitrary_objects_are_refused(tmp_path):
    path = tmp_path / 'evil.pth'
    torch.save({'obj': NotAllowed()}, path)
    with pytest.raises(UnsafeCheckpointError, match='NotAllowed'):
        load_local_checkpoint(str(path))


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match='checkpoint not found'):
        load_local_checkpoint(str(tmp_path / 'none.pth'))
