"""Goal 2 of issue 23: importing mmpos changes nothing of mmengine; mmpos'
tools ask for safe reads and atomic writes with use_safe_io()."""
import json
import os
import subprocess
import sys

from conftest import REPO

STATE = '''
import json, sys
{imports}
from mmengine.fileio import io as mmengine_io
from mmengine.fileio.backends import registry_utils
from mmengine.runner.checkpoint import CheckpointLoader


def name(obj):
    return f'{{obj.__module__}}.{{obj.__qualname__}}'


json.dump(dict(
    loaders={{k: name(v) for k, v in CheckpointLoader._schemes.items()}},
    backends={{k: name(v) for k, v in registry_utils.backends.items()}},
    prefixes={{k: name(v) for k, v in
              registry_utils.prefix_to_backends.items()}},
    instances=sorted(map(str, mmengine_io.backend_instances))), sys.stdout)
'''


def mmengine_state(imports):
    result = subprocess.run(
        [sys.executable, '-c', STATE.format(imports=imports)], cwd=REPO,
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


def test_import_mmpos_leaves_mmengine_as_it_is():
    bare = mmengine_state('import mmengine.runner, mmpretrain, mmdet, mmseg')
    with_mmpos = mmengine_state('import mmengine.runner, mmpretrain, mmdet, '
                                'mmseg\nimport mmpos, mmpos.apis, '
                                'mmpos.checkpoint, mmpos.analysis')
    assert with_mmpos == bare
    assert bare['loaders'][''] == 'mmengine.runner.checkpoint.load_from_local'
    # and what the tools call does change it, through the registries
    safe = mmengine_state('import mmengine.runner\nfrom mmpos.checkpoint '
                          'import use_safe_io\nuse_safe_io()')
    assert safe['loaders'][''] == 'mmpos.checkpoint.safe_io._load_local'
    assert safe['backends']['local'] == \
        'mmpos.checkpoint.write.AtomicLocalBackend'
    assert {k: v for k, v in safe['loaders'].items() if k} == {
        k: v for k, v in bare['loaders'].items() if k}


def test_use_safe_io_makes_runner_checkpoints_load_and_save_atomically(
        tmp_path):
    """In a fresh process: mmengine's own loader refuses its training
    checkpoints under torch's weights_only default; after use_safe_io()
    they load, and saves go through the atomic backend."""
    script = f'''
import torch
from mmengine.logging import MessageHub
from mmengine.runner.checkpoint import _load_checkpoint, save_checkpoint
from mmengine.fileio import get_file_backend
hub = MessageHub.get_instance('x')
hub.update_scalar('loss', 1.)
path = {str(tmp_path / 'iter_1.pth')!r}
save_checkpoint(dict(state_dict=dict(w=torch.ones(2)),
                     message_hub=hub.state_dict()), path)
try:
    _load_checkpoint(path)
    print('OUT mmengine loaded it')
except Exception as err:
    print('OUT mmengine refused:', type(err).__name__)
from mmpos.checkpoint import use_safe_io
use_safe_io()
print('OUT', type(get_file_backend(path)).__name__)
save_checkpoint(dict(state_dict=dict(w=torch.zeros(2)),
                     message_hub=hub.state_dict()), path)
print('OUT', _load_checkpoint(path)['state_dict']['w'].tolist())
'''
    result = subprocess.run([sys.executable, '-c', script], cwd=REPO,
                            capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert result.returncode == 0, result.stderr[-2000:]
    assert [line[4:] for line in result.stdout.splitlines()
            if line.startswith('OUT ')] == [
        'mmengine refused: UnpicklingError', 'AtomicLocalBackend',
        '[0.0, 0.0]']
