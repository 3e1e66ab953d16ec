"""mmpos.guardrails.cli: one line for bad input, a traceback for bugs."""
import errno

import pytest

from mmpos.errors import BadInputError
from mmpos.guardrails.cli import cli_main


def test_cli_main_keeps_bugs_visible(monkeypatch):
    @cli_main('tool.py')
    def main(error):
        raise error

    with pytest.raises(SystemExit, match=r'^tool.py: error: /data/w: '
                       r'Read-only file system$'):
        main(OSError(errno.EROFS, 'Read-only file system', '/data/w'))
    with pytest.raises(SystemExit, match=r'^tool.py: error: No space left'):
        main(OSError(errno.ENOSPC, 'No space left on device'))
    for bug in (ZeroDivisionError('bug'), KeyError('k'), RuntimeError('x'),
                OSError(errno.EIO, 'I/O error')):
        with pytest.raises(type(bug)):
            main(bug)
    with pytest.raises(SystemExit, match=r'^tool.py: error: bad value 3$'):
        main(BadInputError('bad\n value 3'))
    with pytest.raises(SystemExit, match=r'^tool.py: error: no logs$'):
        main(SystemExit('no logs'))
    with pytest.raises(SystemExit, match=r'^tool: stopped$'):
        main(SystemExit('tool: stopped'))
    with pytest.raises(SystemExit) as exit_:
        main(SystemExit(2))
    assert exit_.value.code == 2
    monkeypatch.setenv('MMPOS_DEBUG', '1')
    with pytest.raises(BadInputError):
        main(BadInputError('bad'))


def test_tools_print_no_pkg_resources_deprecation():
    """mmengine's Config.fromfile reloads pkg_resources for an ``mmseg::``
    base, which warns each time; the tools (through mmpos.guardrails) drop
    that warning."""
    import subprocess
    import sys

    from conftest import REPO
    result = subprocess.run(
        [sys.executable, 'tools/misc/print_config.py',
         'configs/demo/upernet_vit-tiny-rope-mixed_mini-ade.py'],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert 'pkg_resources' not in result.stdout + result.stderr
