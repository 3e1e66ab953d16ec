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


#: the packages above the library: the experiment harness, the tools and
#: the benchmarks use mmpos, never the reverse
ABOVE = ('mmpos_harness', 'tools', 'benchmarks')


def layer_of(module):
    """The layer of an ``mmpos`` module name, ``None`` for a package
    outside the repository's layers; ``mmpos`` itself (the root) and the
    packages of :data:`ABOVE` are the top."""
    parts = module.split('.')
    if parts[0] in ABOVE:
        return LAYER['__init__'] + 1
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
    'def f():\n    from mmpos_harness.rehearsal import synthesize\n',
])
def test_finder_sees_hidden_and_relative_upward_imports(tmp_path, source,
                                                        monkeypatch):
    """A module of ``mmpos/models/`` importing the engine (module level),
    evaluation (relative, inside a function), the package root or the
    harness above the library is reported; importing a lower layer is
    not."""
    fake_repo = tmp_path
    path = fake_repo / 'mmpos' / 'models' / 'probe.py'
    path.parent.mkdir(parents=True)
    path.write_text(source + 'from mmpos.checkpoint import read_checkpoint\n'
                    'from ..errors import BadInputError\n')
    monkeypatch.setitem(globals(), 'REPO', fake_repo)
    offenders = upward_imports([path])
    assert len(offenders) == 1 and 'mmpos/models/probe.py:' in offenders[0]


#: the top-level packages below every layer and what each may import
#: besides itself: the position schemes torch (no OpenMMLab stack), the
#: statistics numpy and scipy (no torch either)
BELOW = {
    'mmpos_positions': ('torch', 'contextlib', 'copy', 'math', 'typing'),
    'mmpos_stats': ('numpy', 'scipy', 'collections', 'dataclasses', 'math',
                    'typing'),
}
OPENMMLAB = {'mmpos', 'mmengine', 'mmpretrain', 'mmcv', 'mmdet', 'mmseg'}


@pytest.mark.parametrize('package', sorted(BELOW))
def test_the_packages_below_import_only_what_they_may(package):
    """Every import of a package of :data:`BELOW` is a module it may import
    there or the package itself."""
    offenders = [
        f'{path.relative_to(REPO)}:{line}: {name}'
        for path in sorted((REPO / package).glob('*.py'))
        for line, name in provenance.imported_modules(
            str(path.relative_to(REPO)), str(REPO))
        if name.split('.')[0] not in BELOW[package] + (package, )]
    assert not offenders, '\n'.join(offenders)


def _loaded(code: str) -> set:
    """The top-level packages a fresh interpreter has loaded after
    ``code`` (run in the repository, ``benchmarks/`` first on its path)."""
    code = ('import sys; sys.path.insert(0, "benchmarks"); ' + code +
            '; print(sorted({m.split(".")[0] for m in sys.modules}))')
    return set(eval(subprocess.run(
        [sys.executable, '-c', code], cwd=REPO, check=True,
        capture_output=True, text=True).stdout))


def test_positions_and_the_device_benchmark_run_without_openmmlab():
    """Importing the positions, and the device benchmark that imports them
    from the repository, loads no OpenMMLab package and no ``mmpos``."""
    loaded = _loaded('import mmpos_positions, rope_attention_device')
    assert 'mmpos_positions' in loaded and not loaded & OPENMMLAB


def test_stats_and_the_benchmarks_timing_run_without_openmmlab():
    """A test of the statistics loads neither torch nor an OpenMMLab
    package; the benchmarks' timing helpers judge their verdicts with them
    without the OpenMMLab stack."""
    loaded = _loaded('import mmpos_stats; '
                     'mmpos_stats.welch([1., 2., 3.], [2., 3., 5.])')
    assert {'mmpos_stats', 'scipy'} <= loaded
    assert not loaded & (OPENMMLAB | {'torch'})
    loaded = _loaded('import _timing; _timing.ratio_of_logs('
                     '[0.1, 0.2, 0.15], target="<= 1.5")')
    assert 'mmpos_stats' in loaded and not loaded & OPENMMLAB
