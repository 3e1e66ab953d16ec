"""The quick start's `make demo` / `make test` use the venv that
tools/setup_env.sh makes: $MMPOS_VENV where set (install.md, the Docker
image), else .venv."""
import os
import subprocess

import pytest

from conftest import REPO


@pytest.mark.parametrize('venv, expected', [(None, '.venv/bin/python'),
                                            ('/opt/v', '/opt/v/bin/python')])
def test_make_honours_mmpos_venv(venv, expected):
    env = {k: v for k, v in os.environ.items() if k != 'MMPOS_VENV'}
    if venv:
        env['MMPOS_VENV'] = venv
    lines = {target: subprocess.run(
        ['make', '-n', target], cwd=REPO, env=env, capture_output=True,
        text=True, check=True).stdout.splitlines() for target in ('demo',
                                                                  'test')}
    assert f'{expected} tools/demo.py' in lines['demo']
    assert f'PYTHON={expected} bash tools/run_tests.sh' in lines['test']
