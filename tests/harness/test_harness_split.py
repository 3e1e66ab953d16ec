"""Library vs harness: the installed ``mmpos`` package never imports
``mmpos_harness`` (the mini data, demo, method ranking and paper tables),
neither in its source nor at run time, and the mini dataset classes exist
only for configs that import the harness module naming them."""
import ast
import json
import os
import subprocess
import sys

from conftest import REPO

HARNESS = 'mmpos_harness'


def _harness_references(path):
    """``(line, what)`` of every import of the harness in ``path`` and of
    every string naming it as a module (``importlib.import_module``,
    ``custom_imports``)."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ''] if not node.level else []
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value]
        else:
            continue
        found += [(node.lineno, name) for name in names
                  if name == HARNESS or name.startswith(HARNESS + '.')]
    return found


def test_reference_finder_sees_every_form(tmp_path):
    path = tmp_path / 'probe.py'
    path.write_text('import mmpos_harness\n'
                    'from mmpos_harness.results import read_run\n'
                    'import importlib\n'
                    "importlib.import_module('mmpos_harness.mini_data')\n"
                    "text = 'mmpos_harnessing is not the harness'\n"
                    'from . import mmpos_harness_like\n')
    assert _harness_references(path) == [
        (1, 'mmpos_harness'), (2, 'mmpos_harness.results'),
        (4, 'mmpos_harness.mini_data')]


def test_library_source_never_names_the_harness():
    offenders = [f'{path.relative_to(REPO)}:{line}: {name}'
                 for path in sorted((REPO / 'mmpos').rglob('*.py'))
                 for line, name in _harness_references(path)]
    assert not offenders, '\n'.join(offenders)


def test_importing_every_library_module_leaves_the_harness_unloaded():
    """Every module of ``mmpos`` imported in a fresh interpreter: no
    ``mmpos_harness`` module is loaded and the mini dataset classes are
    not registered; importing the harness module that configs name
    registers them."""
    script = '\n'.join([
        'import importlib, json, pkgutil, sys',
        'import mmpos',
        "names = [m.name for m in pkgutil.walk_packages(mmpos.__path__, "
        "'mmpos.')]",
        'for name in names:',
        '    importlib.import_module(name)',
        'from mmdet.registry import DATASETS as DET',
        'from mmseg.registry import DATASETS as SEG',
        "mini = ('MiniObjectsDataset', 'MiniStuffDataset', 'MiniADEDataset')",
        'registered = lambda: [n for n in mini if n in DET.module_dict or '
        'n in SEG.module_dict]',
        'print(json.dumps([sorted(names), sorted(m for m in sys.modules '
        "if m.split('.')[0] == 'mmpos_harness'), registered()]))",
        "importlib.import_module('mmpos_harness.mini_data.datasets')",
        'print(json.dumps(registered()))',
    ])
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, '-c', script], cwd=REPO, env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    before, after = out.stdout.strip().splitlines()[-2:]
    walked, harness, registered = json.loads(before)
    # the walk imported every module of the package
    modules = sorted('.'.join(p.relative_to(REPO).with_suffix('').parts)
                     .removesuffix('.__init__')
                     for p in (REPO / 'mmpos').rglob('*.py'))
    assert walked == [m for m in modules if m != 'mmpos']
    assert harness == [] and registered == []
    assert json.loads(after) == ['MiniObjectsDataset', 'MiniStuffDataset',
                                 'MiniADEDataset']
