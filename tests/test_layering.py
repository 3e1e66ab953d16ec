"""The package's layers: no import inside ``mmpos`` runs from a lower layer
up to a higher one, at module level or hidden inside a function.

A module may import its own layer's and lower layers' modules. Importing
the package root (``import mmpos``) from inside it imports every layer, so
it counts as the top. mmpos' registries live in :mod:`mmpos.registry`
(layer 0); a function that needs registered classes imports the layer that
registers them (``import mmpos.models``), never the whole package.

Below every layer, outside ``mmpos``: the position schemes
(``mmpos_positions``), which import torch and themselves only, and the
statistics (``mmpos_stats``), which import numpy and scipy only (no torch),
so that both run without the OpenMMLab stack.
"""
import subprocess
import sys

import pytest

from conftest import REPO
from mmpos_harness import provenance

#: lowest first; a subpackage or top-level module of ``mmpos`` per entry
LAYERS = (
    ('version', 'registry', 'errors'),  # no mmpos imports
    ('checkpoint', ),  # read, match, load, write checkpoint files
    ('datasets', ),  # transforms, safe image loading
    ('models', ),  # layers, positions, backbones, methods
    ('apis', 'converters'),  # build a backbone from a config / a file
    ('evaluation', 'analysis'),  # probes, metrics, statistics, pictures
    ('engine', ),  # hooks that run probes during training, optimizers
    ('guardrails', ),  # what tools check before a run starts
    ('__init__', ),  # the package root imports everything
)
LAYER = {name: i for i, names in enumerate(LAYERS) for name in names}


def _module_name(path):
    parts = list(path.relative_to(REPO).with_suffix('').parts)
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def layer_of(module):
    """The layer of an ``mmpos`` module name, ``None`` for another
    package; ``mmpos`` itself (the root) is the top."""
    parts = module.split('.')
    if parts[0] != 'mmpos':
        return None
    if len(parts) == 1:
        return LAYER['__init__']
    if parts[1] not in LAYER:
        raise KeyError(f'{module}: mmpos.{parts[1]} is in no layer of '
                       'tests/test_layering.py::LAYERS; place it there')
    return LAYER[parts[1]]


def upward_imports(paths):
    offenders = []
    for path in paths:
        own = layer_of(_module_name(path)) if path.name != '__init__.py' \
            or path.parent.name != 'mmpos' else LAYER['__init__']
        for line, name in provenance.imported_modules(
                str(path.relative_to(REPO)), str(REPO)):
            target = layer_of(name)
            if target is not None and target > own:
                offenders.append(f'{path.relative_to(REPO)}:{line}: '
                                 f'{name} (layer {target} > {own})')
    return offenders


def test_every_subpackage_has_a_layer():
    names = {p.stem if p.is_file() else p.name
             for p in (REPO / 'mmpos').iterdir()
             if p.suffix == '.py' or (p / '__init__.py').exists()}
    assert names == set(LAYER), (
        f'not placed: {sorted(names - set(LAYER))}; '
        f'gone: {sorted(set(LAYER) - names)}')


def test_no_import_runs_upwards():
    offenders = upward_imports(sorted((REPO / 'mmpos').rglob('*.py')))
    assert not offenders, '\n'.join(offenders)


@pytest.mark.parametrize('source', [
    'from mmpos.engine.hooks import EMATeacherHook\n',
    'def f():\n    from ..evaluation.knn import knn_accuracy\n',
    'def f():\n    import mmpos\n',
])
def test_finder_sees_hidden_and_relative_upward_imports(tmp_path, source,
                                                        monkeypatch):
    """A module of ``mmpos/models/`` importing the engine (module level),
    evaluation (relative, inside a function) or the package root is
    reported; importing a lower layer is not."""
    fake_repo = tmp_path
    path = fake_repo / 'mmpos' / 'models' / 'probe.py'
    path.parent.mkdir(parents=True)
    path.write_text(source + 'from mmpos.checkpoint import read_checkpoint\n'
                    'from ..errors import BadInputError\n')
    monkeypatch.setitem(globals(), 'REPO', fake_repo)
    offenders = upward_imports([path])
    assert len(offenders) == 1 and 'mmpos/models/probe.py:' in offenders[0]


#: what ``mmpos_positions`` may import besides itself
TORCH_ONLY = ('torch', 'contextlib', 'copy', 'math', 'typing')


def test_positions_import_torch_only():
    """Every import of ``mmpos_positions`` is torch, the standard library
    modules of :data:`TORCH_ONLY` or the package itself."""
    offenders = [
        f'{path.relative_to(REPO)}:{line}: {name}'
        for path in sorted((REPO / 'mmpos_positions').glob('*.py'))
        for line, name in provenance.imported_modules(
            str(path.relative_to(REPO)), str(REPO))
        if name.split('.')[0] not in TORCH_ONLY + ('mmpos_positions', )]
    assert not offenders, '\n'.join(offenders)


def test_positions_and_the_device_benchmark_run_without_openmmlab():
    """Importing the positions, and the device benchmark that imports them
    from the repository, loads no OpenMMLab package and no ``mmpos``."""
    code = ('import sys; sys.path.insert(0, "benchmarks"); '
            'import mmpos_positions, rope_attention_device; '
            'print(sorted({m.split(".")[0] for m in sys.modules}))')
    out = subprocess.run([sys.executable, '-c', code], cwd=REPO, check=True,
                         capture_output=True, text=True).stdout
    loaded = set(eval(out))
    assert 'mmpos_positions' in loaded
    assert not loaded & {'mmpos', 'mmengine', 'mmpretrain', 'mmcv', 'mmdet',
                         'mmseg'}


#: what ``mmpos_stats`` may import
NUMPY_SCIPY = ('numpy', 'scipy', 'collections', 'dataclasses', 'math',
               'typing')


def test_stats_import_numpy_and_scipy_only():
    """Every import of ``mmpos_stats`` is numpy, scipy or a standard
    library module of :data:`NUMPY_SCIPY`: no torch, no ``mmpos``."""
    offenders = [
        f'{path.relative_to(REPO)}:{line}: {name}'
        for path in sorted((REPO / 'mmpos_stats').glob('*.py'))
        for line, name in provenance.imported_modules(
            str(path.relative_to(REPO)), str(REPO))
        if name.split('.')[0] not in NUMPY_SCIPY + ('mmpos_stats', )]
    assert not offenders, '\n'.join(offenders)


def test_stats_and_the_benchmarks_timing_run_without_openmmlab():
    """Importing the statistics, and the benchmarks' timing helpers that
    judge their verdicts with them, loads no OpenMMLab package and no
    ``mmpos``; the statistics load no torch."""
    code = ('import sys; import mmpos_stats; '
            'mmpos_stats.welch([1., 2., 3.], [2., 3., 5.]); '
            'print(sorted({m.split(".")[0] for m in sys.modules}))')
    loaded = set(eval(subprocess.run(
        [sys.executable, '-c', code], cwd=REPO, check=True,
        capture_output=True, text=True).stdout))
    assert {'mmpos_stats', 'scipy'} <= loaded
    assert not loaded & {'torch', 'mmpos', 'mmengine', 'mmpretrain', 'mmcv',
                         'mmdet', 'mmseg'}
    code = ('import sys; sys.path.insert(0, "benchmarks"); import _timing; '
            '_timing.ratio_of_logs([0.1, 0.2, 0.15], target="<= 1.5"); '
            'print(sorted({m.split(".")[0] for m in sys.modules}))')
    loaded = set(eval(subprocess.run(
        [sys.executable, '-c', code], cwd=REPO, check=True,
        capture_output=True, text=True).stdout))
    assert 'mmpos_stats' in loaded
    assert not loaded & {'mmpos', 'mmengine', 'mmpretrain', 'mmcv', 'mmdet',
                         'mmseg'}
