"""Where a measurement came from, and what it measured.

Every result file a page shows records, beside its numbers::

    {"command": "python tools/demo.py",       # what produced it
     "commit": "<40 hex>",                   # HEAD of the tree that ran
     "dirty": ["mmpos/x.py"],                # uncommitted changes it ran with
     "date": "2026-11-27 21:05 UTC",
     "machine": "AMD EPYC ..., 2 CPUs, torch 2.14.1",
     "load": [1.9, 1.7, 1.2],                # os.getloadavg() at the end
     "depends": ["configs/demo", ...],       # the code it ran
     "fingerprint": "<id>"}                  # what that code computed

:func:`record` writes that; :mod:`mmpos_harness.fingerprint` decides from
the fingerprint whether the code still computes the same, and, for the
files of ``depends`` no probe reaches, from :func:`changed_since`: the
commits after ``commit`` that touched them. In a tree without git (an
archive, the Docker image) the commit is :data:`NO_GIT` and the result's
status unknown.

:func:`record` stores ``depends`` as :func:`resolve` completes it: with
the configs its modules name, and without the files of position schemes
nothing in it builds (:func:`scheme_modules`).
"""
import ast
import functools
import inspect
import os
import os.path as osp
import platform
import re
import subprocess
import tempfile
import time
from types import MappingProxyType
from typing import (Dict, Iterable, List, Mapping, Optional, Sequence, Set,
                    Tuple)

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


NO_GIT = 'no git'  # the commit of a tree without git (an archive, Docker)


def _git(*args: str, root: str = ROOT) -> str:
    return subprocess.run(['git', '-C', root, *args], check=True,
                          capture_output=True, text=True).stdout.rstrip('\n')


@functools.lru_cache(None)
def has_git(root: str = ROOT) -> bool:
    """Whether ``root`` is a git work tree (an unpacked archive or a
    Docker image's copy is not)."""
    return subprocess.run(['git', '-C', root, 'rev-parse', '--git-dir'],
                          capture_output=True).returncode == 0 and \
        osp.samefile(_git('rev-parse', '--show-toplevel', root=root), root)


def machine() -> str:
    """The machine a measurement ran on: CPU model, logical CPUs, torch
    version."""
    import torch
    cpu = platform.processor() or platform.machine()
    if osp.isfile('/proc/cpuinfo'):
        with open('/proc/cpuinfo') as f:
            cpu = next((line.split(':', 1)[1].strip() for line in f
                        if line.startswith('model name')), cpu)
    return f'{cpu}, {os.cpu_count()} CPUs, torch {torch.__version__}'


def config_sources(config: str, root: str = ROOT) -> List[str]:
    """``config`` and every file of this repository its ``_base_`` chain
    reads, relative to ``root``, sorted: the configs a result measured
    through ``config`` (``mmdet::``-style bases are the pinned packages',
    not followed)."""
    found, todo = set(), [osp.normpath(osp.join(root, config))]
    while todo:
        path = todo.pop()
        if path in found:
            continue
        found.add(path)
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                    getattr(t, 'id', None) == '_base_' for t in node.targets):
                bases = ast.literal_eval(node.value)
                for base in [bases] if isinstance(bases, str) else bases:
                    if '::' not in base:
                            todo.append(osp.normpath(
                            osp.join(osp.dirname(path), base)))
    return sorted(osp.relpath(p, root) for p in found)


def files_under(path: str, root: str = ROOT) -> List[str]:
    """The files git tracks under ``path`` (both relative to ``root``): a
    ``depends`` list that leaves some of a folder's files out; in a tree
    without git, the files there (no ``__pycache__``)."""
    if has_git(root):
        return _git('ls-files', '--', path, root=root).splitlines()
    full = osp.join(root, path)
    if osp.isfile(full):
        return [path]
    return sorted(osp.relpath(osp.join(folder, name), root)
                  for folder, dirs, names in os.walk(full)
                  if '__pycache__' not in folder.split(os.sep)
                  for name in names)


# the position schemes' torch-only package and mmpos' binding of it: their
# own files name every scheme, so their strings do not say what a result
# builds
POSITIONS = 'mmpos_positions'
POSITION_PACKAGES = (POSITIONS, 'mmpos/models/layers/positions')
# the names whose import builds every registered scheme (a scheme table
# read from the registry)
ALL_SCHEMES = tuple(f'{p.replace("/", ".")}.SCHEMES'
                    for p in POSITION_PACKAGES)
# the code trees whose imports decide which scheme files run only for
# their own schemes (:func:`scheme_modules`)
IMPORTERS = ('mmpos', 'mmpos_harness', 'tools', 'benchmarks')


def imported_modules(path: str, root: str = ROOT) -> List[Tuple[int, str]]:
    """``(line, absolute module name)`` of every import in the Python file
    ``root/path``, nested ones included, relative imports resolved against
    the file's package. ``from pkg import name`` yields ``pkg.name``
    (``name`` may be a submodule or a name ``pkg`` defines)."""
    parts = path[:-len('.py')].split('/')
    package = parts[:-1]  # a package's __init__ resolves against itself
    found = []
    with open(osp.join(root, path)) as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                source = '.'.join(base + [node.module] if node.module
                                  else base)
            else:
                source = node.module
            found += [(node.lineno, f'{source}.{alias.name}')
                      for alias in node.names]
    return found


def _module_files(module: str, root: str = ROOT) -> Set[str]:
    """The repository files a module name may be (``a/b.py`` or
    ``a/b/__init__.py``)."""
    target = module.replace('.', '/')
    return {p for p in (target + '.py', osp.join(target, '__init__.py'))
            if osp.isfile(osp.join(root, p))}


def _import_files(module: str, exported: Dict[str, str]) -> Set[str]:
    """The files an imported name ``pkg.name`` (:func:`imported_modules`)
    reads: ``pkg.name`` as a module, ``pkg`` itself, and where ``pkg``
    re-exports ``name`` (``exported``: ``{pkg.name: file}``) its file."""
    found = _module_files(module) | _module_files(module.rpartition('.')[0])
    return found | ({exported[module]} if module in exported else set())


@functools.lru_cache(None)
def scheme_modules() -> 'MappingProxyType[str, str]':
    """``{scheme name: file}`` for the position schemes of
    :data:`mmpos.registry.POSITION_ENCODINGS` whose file no code of
    :data:`IMPORTERS` imports from but the positions package's
    ``__init__`` files (:data:`POSITION_PACKAGES`: they list and register
    every scheme), directly or through a name a package re-exports: only
    a model that builds one of that file's schemes runs its code (e.g.
    ``liere`` -> ``mmpos_positions/matrix.py``). Found once per
    process."""
    import importlib
    files = scheme_files()
    inits = {osp.join(p, '__init__.py') for p in POSITION_PACKAGES}
    # a name imported from a package: the file that defines it
    exported = {}
    for package in (p.replace('/', '.') for p in POSITION_PACKAGES):
        module = importlib.import_module(package)
        exported.update({f'{package}.{name}': osp.relpath(
            inspect.getsourcefile(obj), ROOT) for name in module.__all__
            for obj in [getattr(module, name)]
            if inspect.isclass(obj) or inspect.isfunction(obj)})
    imported = set()
    for tree in (*IMPORTERS, POSITIONS):
        for path in files_under(tree):
            if path.endswith('.py') and path not in inits:
                for _, module in imported_modules(path):
                    imported |= _import_files(module, exported)
    return MappingProxyType({name: path for name, path in files.items()
                             if path not in imported})


@functools.lru_cache(None)
def scheme_files() -> 'MappingProxyType[str, str]':
    """``{scheme name: file}`` of every registered position scheme."""
    from mmpos.models.layers import positions  # noqa: F401 (registers)
    from mmpos.registry import POSITION_ENCODINGS
    return MappingProxyType({
        name: osp.relpath(inspect.getsourcefile(cls), ROOT)
        for name, cls in POSITION_ENCODINGS.module_dict.items()})


@functools.lru_cache(None)
def default_schemes() -> frozenset:
    """The schemes mmpos' registered models build when a config gives no
    ``rope``: each one's ``rope`` argument's default ``type``."""
    import mmpos.models  # noqa: F401 (registers)
    from mmpos.registry import MODELS
    found = set()
    for cls in MODELS.module_dict.values():
        if not cls.__module__.startswith('mmpos.'):
            continue
        param = inspect.signature(cls).parameters.get('rope')
        if param is not None and isinstance(param.default, dict):
            found.add(param.default.get('type'))
    return frozenset(found)


@functools.lru_cache(None)
def config_schemes(config: str, root: str = ROOT) -> frozenset:
    """The position schemes ``config``'s models may build: the ``type`` of
    every ``rope`` it sets (its ``_base_`` chain resolved) and
    :func:`default_schemes`."""
    from mmengine.config import Config

    from mmpos.guardrails.config_check import config_dicts
    cfg = Config.fromfile(osp.join(root, config)).to_dict()
    return default_schemes().union(
        node['rope'].get('type') for _, node in config_dicts(cfg)
        if isinstance(node.get('rope'), dict))


def without_schemes(paths: Iterable[str], schemes: Iterable[str],
                    root: str = ROOT) -> List[str]:
    """``paths`` without the :func:`scheme_modules` of the schemes not in
    ``schemes``: a folder holding one is replaced by its entries (files and
    folders, the same way down) but that file, so a result of RoPE-Mixed
    models does not go stale when LieRE's file changes."""
    modules, schemes = scheme_modules(), set(schemes)
    unused = (set(modules.values()) -
              {path for name, path in modules.items() if name in schemes})

    def expand(path):
        if path in unused:
            return []
        if not any(u.startswith(path + '/') for u in unused):
            return [path]
        entries = sorted({p[len(path) + 1:].split('/')[0]
                          for p in files_under(path, root)})
        return [q for entry in entries for q in expand(f'{path}/{entry}')]

    return [q for path in paths for q in expand(path.rstrip('/'))]


@functools.lru_cache(None)
def _strings(path: str, root: str) -> frozenset:
    """The string constants of the Python file ``root/path``."""
    with open(osp.join(root, path)) as f:
        tree = ast.parse(f.read(), path)
    return frozenset(node.value for node in ast.walk(tree)
                     if isinstance(node, ast.Constant)
                     and isinstance(node.value, str))


def built_schemes(depends: Iterable[str], root: str = ROOT) -> frozenset:
    """The position schemes a result with these ``depends`` may build: the
    ones a listed config sets (:func:`config_schemes`, model defaults
    included) or a listed Python file (or one in a listed folder) other
    than the positions packages' own names as a string
    (``dict(type='liere')``, a scheme table) or reads from the registry's
    list (imports ``SCHEMES``: all of them), and the configs that a listed
    module outside ``mmpos/`` names (:func:`resolve`)."""
    return _completed(depends, root)[1]


@functools.lru_cache(None)
def _reads_all_schemes(path: str, root: str) -> bool:
    """Whether the Python file ``root/path`` reads the registry's list of
    schemes (:data:`ALL_SCHEMES`: ``from mmpos_positions import SCHEMES``
    or ``mmpos_positions.SCHEMES``), i.e. builds every scheme."""
    if any(m in ALL_SCHEMES for _, m in imported_modules(path, root)):
        return True
    packages = {p.replace('/', '.') for p in POSITION_PACKAGES}
    with open(osp.join(root, path)) as f:
        tree = ast.parse(f.read(), path)
    bound = {alias.asname or alias.name for node in ast.walk(tree)
             if isinstance(node, ast.Import) for alias in node.names
             if alias.name in packages}
    return any(isinstance(node, ast.Attribute) and node.attr == 'SCHEMES'
               and isinstance(node.value, ast.Name) and node.value.id in bound
               for node in ast.walk(tree))


@functools.lru_cache(None)
def _completed_cached(depends: Tuple[str, ...], root: str,
                      registry_reads: bool = True
                      ) -> Tuple[Tuple[str, ...], frozenset]:
    paths = set(depends)
    if any(p in ('mmpos', 'mmpos/models') or p.startswith('mmpos/models/')
           for p in paths) and not any(
               p == POSITIONS or p.startswith(POSITIONS + '/') for p in paths):
        paths.add(POSITIONS)  # what mmpos' models run their positions with
    modules = [f for p in paths
               if not p.startswith(('configs/', *POSITION_PACKAGES))
               for f in files_under(p, root)
               if f.endswith('.py') and not f.startswith(POSITION_PACKAGES)]
    strings = set().union(*(_strings(p, root) for p in modules))
    if registry_reads and any(_reads_all_schemes(p, root) for p in modules):
        strings |= set(scheme_files())
    named = set().union(*(_strings(p, root) for p in modules
                          if not p.startswith('mmpos/')))
    paths |= {p for s in named if s.startswith('configs/')
              and s.endswith('.py') and osp.isfile(osp.join(root, s))
              for p in config_sources(s, root)}
    configs = [p for p in paths if p.startswith('configs/')
               and p.endswith('.py')]
    schemes = strings.union(default_schemes(),
                            *(config_schemes(c, root) for c in configs))
    return tuple(sorted(paths)), frozenset(schemes)


def _completed(depends: Iterable[str], root: str = ROOT,
               registry_reads: bool = True):
    """``(paths, schemes)``: ``depends`` with the configs its modules name,
    and :func:`built_schemes` (without the modules that read the
    registry's list where ``registry_reads`` is false)."""
    return _completed_cached(tuple(sorted(set(depends))), root,
                             registry_reads)


def registry_readers(depends: Iterable[str], commit: Optional[str] = None,
                     root: str = ROOT) -> List[str]:
    """The Python files of ``depends`` (outside configs and the positions
    packages) that read the registry's list of schemes: now, or in their
    text at ``commit``."""
    modules = [f for p in depends
               if not p.startswith(('configs/', *POSITION_PACKAGES))
               for f in files_under(p, root)
               if f.endswith('.py') and not f.startswith(POSITION_PACKAGES)]
    if commit is None:
        return [p for p in modules if _reads_all_schemes(p, root)]
    found = []
    for path in modules:
        try:
            text = _git('show', f'{commit}:{path}', root=root)
        except subprocess.CalledProcessError:
            continue  # not there then
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(osp.join(tmp, osp.dirname(path)), exist_ok=True)
            with open(osp.join(tmp, path), 'w') as f:
                f.write(text)
            if _reads_all_schemes.__wrapped__(path, tmp):
                found.append(path)
    return found


def resolve(depends: Iterable[str], root: str = ROOT) -> List[str]:
    """``depends`` (paths relative to ``root``) as a record stores it,
    sorted:

    * with every config a listed module outside ``mmpos/`` names (a
      string ``'configs/....py'``) and its :func:`config_sources`;
    * with the positions package (:data:`POSITIONS`) where mmpos' models
      are listed;
    * without the :func:`scheme_modules` of schemes that nothing listed
      builds (:func:`without_schemes`, :func:`built_schemes`).
    """
    paths, schemes = _completed(depends, root)
    return sorted(without_schemes(paths, schemes, root))


def record(command: str, depends: Sequence[str], root: str = ROOT) -> dict:
    """The provenance of a result produced now by ``command`` from the
    tree at ``root`` (module docstring); ``depends`` are paths relative to
    ``root`` and must exist, stored as :func:`resolve` completes them."""
    missing = [p for p in depends if not osp.exists(osp.join(root, p))]
    if missing:
        raise ValueError(f'provenance: depends names paths that do not '
                         f'exist: {", ".join(missing)}')
    from mmpos_harness import fingerprint
    depends = resolve(depends, root)
    dirty = _git('status', '--porcelain', '--', *depends,
                 root=root) if has_git(root) else ''
    return dict(command=command, commit=head(root),
                dirty=[line[3:] for line in dirty.splitlines()],
                date=now(), machine=machine(),
                load=[round(x, 2) for x in os.getloadavg()],
                depends=list(depends),
                fingerprint=fingerprint.write(depends, command, root))


def head(root: str = ROOT) -> str:
    """The commit checked out at ``root``; :data:`NO_GIT` in a tree
    without git (its results' status is then unknown)."""
    return _git('rev-parse', 'HEAD', root=root) if has_git(root) else NO_GIT


def now() -> str:
    return time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())


def shallow(root: str = ROOT) -> bool:
    """Whether ``root`` is a shallow clone (its history cut)."""
    return _git('rev-parse', '--is-shallow-repository', root=root) == 'true'


def changed_since(provenance: dict, root: str = ROOT) -> List[str]:
    """``'<short hash> <subject>'`` of each commit after the record's commit
    that changed one of its ``depends`` (newest first); empty when the
    result still measures the current code, i.e. when its ``depends`` hold
    at ``HEAD`` what they held at its commit (a change and its revert leave
    a result current) or only what :func:`moved_only` finds: the same code
    once the files renamed since are named as before.

    Raises:
        LookupError: the record's commit is not in the repository (a
            shallow clone, or history rewritten since).
    """
    commit = provenance['commit']
    try:
        _git('cat-file', '-e', f'{commit}^{{commit}}', root=root)
    except subprocess.CalledProcessError:
        raise LookupError(f'commit {commit} of '
                          f'"{provenance["command"]}" is not in {root}') \
            from None
    changed = _git('diff', '--name-only', commit, 'HEAD', '--',
                   *provenance['depends'], root=root).splitlines()
    renames = renames_since(commit, root)
    sources = {new: old for old, new in renames.items()}
    changed = {sources.get(f, f) for f in changed}
    changed = sorted(f for f in changed if not moved_only(f, commit, root))
    if not changed:
        return []
    return _git('log', '--format=%h %s', f'{commit}..HEAD', '--', *changed,
                *(renames[f] for f in changed if f in renames),
                root=root).splitlines()


@functools.lru_cache(None)
def renames_since(commit: str, root: str = ROOT
                  ) -> 'MappingProxyType[str, str]':
    """``{path at commit: path at HEAD}`` of the files git finds renamed
    between ``commit`` and ``HEAD`` (``git diff -M``: moved, and perhaps
    edited, with at least half of their content kept)."""
    found = {}
    for line in _git('diff', '-M', '--name-status', '--diff-filter=R',
                     commit, 'HEAD', root=root).splitlines():
        _, old, new = line.split('\t')
        found[old] = new
    return MappingProxyType(found)


def renamed_depends(depends: Iterable[str], commit: str,
                    root: str = ROOT) -> List[str]:
    """``depends`` of a record measured at ``commit`` with the paths that
    its files renamed since have now (:func:`renames_since`): the code it
    ran, where it lives now."""
    depends = set(depends)
    moved = {new for old, new in renames_since(commit, root).items()
             if any(old == d or old.startswith(d.rstrip('/') + '/')
                    for d in depends)}
    return sorted(depends | moved)


def _module(path: str) -> str:
    """The module name of the Python file ``path`` (``a/b/__init__.py``:
    ``a.b``)."""
    parts = path[:-len('.py')].split('/')
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def undo_renames(text: str, renames: Mapping[str, str]) -> str:
    """``text`` with each renamed file's new path (``renames``: ``{old:
    new}``) written as its old one, and for a Python file its new module
    name (``mmpos_stats.paired``) as its old one."""
    for old, new in renames.items():
        text = text.replace(new, old)
        if old.endswith('.py') and new.endswith('.py'):
            text = re.sub(rf'(?<![\w.]){re.escape(_module(new))}(?!\w)',
                          _module(old), text)
    return text


def _imports(node: ast.stmt, path: str) -> List[Tuple[str, str]]:
    """``(bound name, module or name it binds)`` of an import statement of
    the file ``path`` (relative imports resolved against its package)."""
    if isinstance(node, ast.Import):
        return [(a.asname or a.name.split('.')[0], a.name)
                for a in node.names]
    package = _module(path).split('.')
    if not path.endswith('__init__.py'):
        package = package[:-1]
    base = node.module or ''
    if node.level:
        base = '.'.join(package[:len(package) - node.level + 1] +
                        ([node.module] if node.module else []))
    return [(a.asname or a.name, f'{base}.{a.name}') for a in node.names]


def code_of(text: str, path: str,
            renames: Mapping[str, str] = MappingProxyType({})) -> str:
    """The code of the Python source ``text`` of the file ``path``: its
    syntax tree (docstrings and every other constant kept; comments and
    layout not), each run of consecutive import statements as the sorted
    ``(name, module)`` pairs it binds (:func:`_imports`: ``from a import
    b`` and ``import a.b as b`` are one); the files and modules of
    ``renames`` (``{old: new}``) named as before (:func:`undo_renames`) in
    its strings and imports."""
    tree = ast.parse(text, path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = undo_renames(node.value, renames)
        for field, value in ast.iter_fields(node):
            if not (isinstance(value, list) and value
                    and isinstance(value[0], ast.stmt)):
                continue
            merged, run = [], None
            for stmt in value:
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    if run is None:
                        run = ast.Import(names=[])
                        merged.append(run)
                    run.names += [ast.alias(name=undo_renames(
                        f'{module} as {name}', renames))
                        for name, module in _imports(stmt, path)]
                    run.names.sort(key=lambda a: a.name)
                else:
                    run = None
                    merged.append(stmt)
            setattr(node, field, merged)
    return ast.dump(tree)


@functools.lru_cache(None)
def moved_only(path: str, commit: str, root: str = ROOT) -> bool:
    """Whether the file ``path`` of ``commit`` holds at ``HEAD`` (under its
    new name, where renamed) what it held then once the renames since
    (:func:`renames_since`) are undone in it (:func:`undo_renames`): for a
    Python file the same code (:func:`code_of`), i.e. it changed only the
    names of files and modules moved since (an import of a moved module)."""
    renames = renames_since(commit, root)
    try:
        old = _git('show', f'{commit}:{path}', root=root)
        new = _git('show', f'HEAD:{renames.get(path, path)}', root=root)
    except subprocess.CalledProcessError:  # added or deleted since
        return False
    if not path.endswith('.py'):
        return undo_renames(new, renames) == old
    try:
        return code_of(old, path) == code_of(new, renames.get(path, path),
                                             renames)
    except SyntaxError:
        return False
