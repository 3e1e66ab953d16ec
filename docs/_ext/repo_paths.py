"""Find the repository paths a Markdown page mentions and check they exist.

Used by the Sphinx extension (:mod:`mmpos_docs`, every page of the site) and
by ``tests/test_docs.py`` (``README.md``, ``CONTRIBUTING.md`` and the config
READMEs, which live outside the site).

A *mention* is a token of an inline code span or of a fenced code block that

* starts with a top-level folder of the repository (``configs/...``,
  ``tools/...``, ``mmpos/...``) or is a top-level file (``Makefile``);
* is a bare file name ending in ``.py``, ``.sh``, ``.yml`` or ``.yaml``
  (``droppos_vit-tiny_mini.py``): some file of that name must exist;
* is a dotted module path ``mmpos.a.b.Name`` (or ``mmpos_harness.a.Name``): its module part must exist
  and ``Name`` must be a word of that module's source (of the package's
  ``__init__.py`` for ``mmpos.a.Name``).

``{a,b}`` is expanded, ``*`` is a glob; tokens with a placeholder (``<x>``,
``...``, ``$VAR``) are skipped. ``PLANNED`` paths (the layout the current
redesign moves to) may be missing; once one exists it is reported so the
list shrinks to nothing.
"""
import fnmatch
import itertools
import os
import re
from pathlib import Path
from typing import Dict, Iterable, List, Set, Tuple

SKIP_DIRS = {'.git', '.venv', 'work_dirs', 'data', '_build', '_generated',
             '__pycache__', '.pytest_cache', 'build', 'outputs'}
FILE_EXTS = ('.py', '.sh', '.yml', '.yaml')
# Names of other projects' files that pages mention on purpose.
EXTERNAL_NAMES = {
    'main_pretrain.py', 'main_finetune.py', 'pretrain_base.sh',
    'mae_vit-base-p16.py', 'setup.py', 'conf.py', 'hubconf.py',
    'eval_linear.py', 'main_dino.py', 'train.py', 'test.py',
}
# The layout the redesign in progress moves to: allowed to be missing.
PLANNED: Set[str] = set()
_SPAN = re.compile(r'(?<!`)`([^`\n]+)`(?!`)')
_FENCE = re.compile(r'^(\s*)(`{3,}|~{3,})(.*)$')
_SPLIT = re.compile(r"[\s=\"'();\[\]]+|,(?![^{]*\})")
_PLACEHOLDER = re.compile(r'\{\w+\}|<|>|\.\.\.|\$|%|\bN\b|\bX\b|\bDIR\b|\bCKPT\b')
_MODULE = re.compile(r'^mmpos(_harness)?(\.\w+)+$')


class RepoIndex:
    """The files of a repository checkout (without build outputs)."""

    def __init__(self, root: str):
        self.root = Path(root)
        self.top = set()
        self.basenames: Set[str] = set()
        self.files: List[str] = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
            rel = os.path.relpath(dirpath, self.root)
            for name in filenames:
                self.basenames.add(name)
                self.files.append(name if rel == '.' else f'{rel}/{name}')
        for entry in self.root.iterdir():
            if entry.name not in SKIP_DIRS and not entry.name.startswith('.'):
                self.top.add(entry.name + ('/' if entry.is_dir() else ''))
        self.top |= {p for p in PLANNED if '/' in p and p.count('/') == 1}

    def is_candidate(self, token: str) -> bool:
        if '/' in token:
            return any(token.startswith(t) for t in self.top if t.endswith('/'))
        return token in self.top or token.endswith(FILE_EXTS) \
            or bool(_MODULE.match(token))

    def exists(self, token: str) -> bool:
        if _MODULE.match(token) and not token.endswith(FILE_EXTS):
            return self._module_exists(token)
        if '/' not in token and token not in self.top:
            return token in self.basenames
        path = token.rstrip('/')
        if '*' in path or '?' in path:
            return any(fnmatch.fnmatch(f, path) or
                       fnmatch.fnmatch(f, path + '/*') for f in self.files)
        return (self.root / path).exists()

    def _module_exists(self, dotted: str) -> bool:
        """``mmpos.a.b[.Name]``: the module exists and ``Name`` (the first
        part after it) is a word of its source, or of the package's
        ``__init__.py`` when ``Name`` is not a module."""
        parts = dotted.split('.')
        path = self.root
        for i, part in enumerate(parts):
            if (path / part).is_dir():
                path = path / part
            elif (path / f'{part}.py').is_file():
                if i + 1 == len(parts):
                    return True
                return _defines(path / f'{part}.py', parts[i + 1])
            else:
                init = path / '__init__.py'
                return i >= 2 and init.is_file() and _defines(init, part)
        return True


def _defines(source: Path, name: str) -> bool:
    return re.search(rf'\b{re.escape(name)}\b', source.read_text()) is not None


def _expand(token: str) -> List[str]:
    match = re.search(r'\{([^{}]*,[^{}]*)\}', token)
    if not match:
        return [token]
    head, tail = token[:match.start()], token[match.end():]
    return list(itertools.chain.from_iterable(
        _expand(head + alt + tail) for alt in match.group(1).split(',')))


def _clean(token: str) -> str:
    token = token.split('::')[0]
    token = re.sub(r':\d+(-\d+)?$', '', token)
    return token.strip('.,:;!?')


def mentions(text: str) -> Iterable[Tuple[int, str]]:
    """``(line number, token)`` of every code-span / code-block token."""
    in_fence, fence = False, ''
    for lineno, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if m and not in_fence and m.group(2) in m.group(3):
            m = None  # ```` ```{x} ```` : an inline span, not a fence
        if m:
            if not in_fence:
                in_fence, fence = True, m.group(2)
                info = m.group(3).strip()
                # directive fences ({toctree}, {include}, ...) hold no commands
                if info.startswith('{') and not info.startswith(
                        ('{code-block}', '{code}')):
                    fence = 'directive:' + fence
                continue
            if m.group(2).startswith(fence.split(':')[-1]) and \
                    not m.group(3).strip():
                in_fence = False
                continue
        if in_fence:
            if fence.startswith('directive:'):
                continue
            chunks = [line.split(' #')[0]]
        else:
            chunks = _SPAN.findall(line)
        for chunk in chunks:
            for token in _SPLIT.split(chunk):
                if token:
                    yield lineno, token


# a file a page's own commands write (`cat > my_config.py`, `... > out.txt`)
_WRITTEN = re.compile(r'(?:^|\s)>\s*([^\s<>|&;]+)', re.M)


def check_text(text: str, index: RepoIndex) -> List[Tuple[int, str, str]]:
    """``(line, token, problem)`` for every mention that does not exist
    (files the page's commands write themselves excepted)."""
    problems = []
    written = set(_WRITTEN.findall(text))
    for lineno, raw in mentions(text):
        token = _clean(raw)
        if not token or _PLACEHOLDER.search(token) or token in written or \
                not index.is_candidate(token) or token in EXTERNAL_NAMES:
            continue
        for path in _expand(token):
            planned = any(path == p or path.startswith(p) for p in PLANNED
                          if p.endswith('/')) or path in PLANNED
            if planned:
                if index.exists(path) and path in PLANNED:
                    problems.append((lineno, path, 'exists now: remove it '
                                     'from repo_paths.PLANNED'))
                continue
            if not index.exists(path):
                problems.append((lineno, path, 'no such file or folder in '
                                 'the repository'))
    return problems


def check_files(root: str, paths: Iterable[str]) -> Dict[str, list]:
    index = RepoIndex(root)
    out = {}
    for path in paths:
        problems = check_text(Path(root, path).read_text(), index)
        if problems:
            out[path] = problems
    return out
