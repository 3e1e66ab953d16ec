"""tools/misc/compare_configs.py on a temporary git repository: a config
refactored into a ``_base_`` file with the same result is not reported, a
changed one is, with its first differing key."""
import importlib.util
import subprocess
from pathlib import Path

from conftest import REPO


def _tool():
    spec = importlib.util.spec_from_file_location(
        'compare_configs', REPO / 'tools/misc/compare_configs.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _git(root, *args):
    subprocess.run(['git', *args], cwd=root, check=True, capture_output=True)


def _write(root, path, text):
    path = Path(root, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_reports_exactly_the_changed_config(tmp_path, capsys):
    root = tmp_path / 'repo'
    root.mkdir()
    _git(root, 'init', '-q')
    _write(root, 'configs/a/refactored.py',
           "schedule = dict(lr=0.1, epochs=[1, 2])\nmodel = dict(depth=2)\n")
    _write(root, 'configs/a/changed.py',
           "model = dict(depth=2, head=dict(width=8))\n")
    _git(root, 'add', 'configs')
    _git(root, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm',
         'start')
    rev = subprocess.run(['git', 'rev-parse', 'HEAD'], cwd=root, check=True,
                         capture_output=True, text=True).stdout.strip()
    # the same dict, now through a base file and a one-level delta
    _write(root, 'configs/a/_base_/schedule.py',
           "schedule = dict(lr=0.5, epochs=[1, 2])\nmodel = dict(depth=3)\n")
    _write(root, 'configs/a/refactored.py',
           "# the shared schedule with lr 0.1 and depth 2\n"
           "_base_ = ['./_base_/schedule.py']\n"
           "schedule = dict(lr=0.1)\nmodel = dict(_delete_=True, depth=2)\n")
    _write(root, 'configs/a/changed.py',
           "model = dict(depth=2, head=dict(width=16))\n")
    tool = _tool()

    assert tool.main([rev, '--root', str(root)]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines == [
        'configs/a/changed.py: differs at model.head.width',
        f'1 of 2 configs differ from {rev}',
    ]

    _write(root, 'configs/a/changed.py',
           "model = dict(depth=2, head=dict(width=8))\n")
    _write(root, 'configs/a/new.py', "model = dict(depth=1)\n")
    assert tool.main([rev, '--root', str(root)]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith('configs/a/new.py: only in the working tree')
    assert len(lines) == 2

    Path(root, 'configs/a/new.py').unlink()
    assert tool.main([rev, '--root', str(root)]) == 0
    assert capsys.readouterr().out.strip() == (
        f'0 of 2 configs differ from {rev}')


def test_first_difference_names_the_key_path():
    tool = _tool()
    assert tool.first_difference({'a': [1, {'b': 2}]}, {'a': [1, {'b': 2}]
                                                        }) is None
    assert tool.first_difference({'a': [1, {'b': 2}]},
                                 {'a': [1, {'b': 3}]}) == 'a[1].b'
    assert tool.first_difference({'a': 1}, {'a': 1, 'c': 2}) == 'c'
