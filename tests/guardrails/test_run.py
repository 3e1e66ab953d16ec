"""mmpos.guardrails.run: the config that prepare() hands to the tools."""
import importlib.util

import pytest
import torch

from conftest import REPO
from mmpos.errors import LaunchError
from mmpos.guardrails.run import ready_config

SEG_CONFIG = 'configs/demo/upernet_vit-tiny-rope-mixed_mini-ade.py'
_spec = importlib.util.spec_from_file_location('guardrails_train_tool',
                                               REPO / 'tools/train.py')
train_tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(train_tool)


def test_resume_and_auto_resume(tmp_path):
    """--resume on a work dir without checkpoint stops; --auto-resume starts
    fresh there and resumes the newest checkpoint where there is one."""
    def merged(*options):
        args = train_tool.parse_args([SEG_CONFIG, '--work-dir', str(tmp_path),
                                      '--skip-data-check', *options])
        return ready_config(SEG_CONFIG, args, 'train')

    with pytest.raises(LaunchError, match=f'nothing to resume in {tmp_path}'):
        merged('--resume')
    cfg = merged('--auto-resume')
    assert not cfg.resume and cfg.load_from is None
    torch.save({'state_dict': {}}, tmp_path / 'iter_2.pth')
    (tmp_path / 'last_checkpoint').write_text(str(tmp_path / 'iter_2.pth'))
    for option in ('--resume', '--auto-resume'):
        cfg = merged(option)
        assert cfg.resume and cfg.load_from == str(tmp_path / 'iter_2.pth')
