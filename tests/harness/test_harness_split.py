"""Library vs harness: the installed ``mmpos`` package never imports
``mmpos_harness`` (the mini data, demo, method ranking and paper tables),
neither in its source nor at run time, and the mini dataset classes exist
only for configs that import the harness module naming them. The tools
import the installed packages, never editing ``sys.path``, and only the
harness tools (:data:`HARNESS_TOOLS`) import the harness."""
import ast
import json
import os
import subprocess
import sys

from conftest import REPO

HARNESS = 'mmpos_harness'
#: the tools that reproduce the project's numbers, the only ones that import
#: the harness (a folder: every tool in it)
HARNESS_TOOLS = ('tools/demo.py', 'tools/misc/judge_design.py',
                 'tools/misc/make_mini_data.py',
                 'tools/misc/rehearse.py', 'tools/misc/results_status.py',
                 'tools/paper_tables/')


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


def _sys_path_uses(path):
    """Lines of ``path`` that use ``sys.path`` (``sys.path.insert(...)``,
    ``sys.path[:0] = ...``, ``from sys import path``), nested ones too."""
    tree = ast.parse(path.read_text(), str(path))
    return sorted(
        node.lineno for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == 'path'
        and isinstance(node.value, ast.Name) and node.value.id == 'sys'
        or isinstance(node, ast.ImportFrom) and node.module == 'sys'
        and any(alias.name == 'path' for alias in node.names))


def _tools():
    return sorted((REPO / 'tools').rglob('*.py'))


def test_reference_finder_sees_every_form(tmp_path):
    path = tmp_path / 'probe.py'
    path.write_text('import mmpos_harness\n'
                    'from mmpos_harness.results import DONE_MARKER\n'
                    'import importlib\n'
                    "importlib.import_module('mmpos_harness.mini_data')\n"
                    "text = 'mmpos_harnessing is not the harness'\n"
                    'from . import mmpos_harness_like\n'
                    'def main():\n'
                    '    from mmpos_harness.demo import main\n')
    assert sorted(_harness_references(path)) == [
        (1, 'mmpos_harness'), (2, 'mmpos_harness.results'),
        (4, 'mmpos_harness.mini_data'), (8, 'mmpos_harness.demo')]


def test_sys_path_finder_sees_every_form(tmp_path):
    path = tmp_path / 'probe.py'
    path.write_text('import os.path as osp\n'
                    'import sys\n'
                    'sys.path.insert(0, osp.dirname(__file__))\n'
                    'def main():\n'
                    "    sys.path[:0] = ['..']\n"
                    '    from sys import path\n'
                    "    return osp.join('a', 'b'), sys.argv\n")
    assert _sys_path_uses(path) == [3, 5, 6]


def test_tools_and_benchmarks_leave_sys_path_alone():
    """``pip install -e .`` installs ``mmpos`` and ``mmpos_harness``; no
    tool, benchmark or ``hubconf.py`` reaches them through ``sys.path``
    (nor a launcher through ``PYTHONPATH``)."""
    files = [*_tools(), *sorted((REPO / 'benchmarks').rglob('*.py')),
             REPO / 'hubconf.py']
    offenders = [f'{path.relative_to(REPO)}:{line}: sys.path'
                 for path in files for line in _sys_path_uses(path)]
    offenders += [f'{path.relative_to(REPO)}: PYTHONPATH'
                  for path in sorted((REPO / 'tools').rglob('*.sh'))
                  if 'PYTHONPATH' in path.read_text()]
    assert not offenders, '\n'.join(offenders)


def test_only_the_harness_tools_import_the_harness():
    """Every other tool imports only ``mmpos`` (and third-party packages),
    at module level or inside a function; each harness tool does use the
    harness (else it is a library tool and leaves the list)."""
    harness_tools = [path for path in _tools() if any(
        str(path.relative_to(REPO)).startswith(tool)
        for tool in HARNESS_TOOLS)]
    assert all(any(str(path.relative_to(REPO)).startswith(tool)
                   for path in harness_tools) for tool in HARNESS_TOOLS)
    offenders = [f'{path.relative_to(REPO)}:{line}: {name}'
                 for path in _tools() if path not in harness_tools
                 for line, name in _harness_references(path)]
    assert not offenders, '\n'.join(offenders)
    assert [path for path in harness_tools
            if not _harness_references(path)] == []


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
