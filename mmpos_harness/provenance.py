"""Where a measurement came from, and whether the code it measured changed.

Every result file a page shows records, beside its numbers::

    {"command": "python tools/demo.py",       # what produced it
     "commit": "<40 hex>",                   # HEAD of the tree that ran
     "dirty": ["mmpos/x.py"],                # uncommitted changes it ran with
     "date": "2026-11-27 21:05 UTC",
     "machine": "AMD EPYC ..., 2 CPUs, torch 2.14.1",
     "load": [1.9, 1.7, 1.2],                # os.getloadavg() at the end
     "depends": ["configs/demo", ...]}       # paths whose change makes it stale

:func:`record` writes that; :func:`changed_since` lists the commits after
``commit`` that touched ``depends``: a result whose list is not empty
measured code that no longer exists (``tests/test_results.py`` fails on
it).
"""
import ast
import os
import os.path as osp
import platform
import subprocess
import time
from typing import List, Sequence

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def _git(*args: str, root: str = ROOT) -> str:
    return subprocess.run(['git', '-C', root, *args], check=True,
                          capture_output=True, text=True).stdout.rstrip('\n')


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
    ``depends`` list that leaves some of a folder's files out."""
    return _git('ls-files', '--', path, root=root).splitlines()


def record(command: str, depends: Sequence[str], root: str = ROOT) -> dict:
    """The provenance of a result produced now by ``command`` from the
    tree at ``root`` (module docstring); ``depends`` are paths relative to
    ``root`` and must exist."""
    missing = [p for p in depends if not osp.exists(osp.join(root, p))]
    if missing:
        raise ValueError(f'provenance: depends names paths that do not '
                         f'exist: {", ".join(missing)}')
    dirty = _git('status', '--porcelain', '--', *depends, root=root)
    return dict(command=command, commit=_git('rev-parse', 'HEAD', root=root),
                dirty=[line[3:] for line in dirty.splitlines()],
                date=time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()),
                machine=machine(),
                load=[round(x, 2) for x in os.getloadavg()],
                depends=list(depends))


def shallow(root: str = ROOT) -> bool:
    """Whether ``root`` is a shallow clone (its history cut)."""
    return _git('rev-parse', '--is-shallow-repository', root=root) == 'true'


def changed_since(provenance: dict, root: str = ROOT) -> List[str]:
    """``'<short hash> <subject>'`` of each commit after the record's commit
    that changed one of its ``depends`` (newest first); empty when the
    result still measures the current code, i.e. when its ``depends`` hold
    at ``HEAD`` what they held at its commit (a change and its revert leave
    a result current).

    Raises:
        LookupError: the record's commit is not in the repository (a
            shallow clone, or history rewritten since).
    """
    try:
        _git('cat-file', '-e', f'{provenance["commit"]}^{{commit}}',
             root=root)
    except subprocess.CalledProcessError:
        raise LookupError(f'commit {provenance["commit"]} of '
                          f'"{provenance["command"]}" is not in {root}') \
            from None
    if not _git('diff', '--name-only', provenance['commit'], 'HEAD', '--',
                *provenance['depends'], root=root):
        return []
    return _git('log', '--format=%h %s', f'{provenance["commit"]}..HEAD',
                '--', *provenance['depends'], root=root).splitlines()
