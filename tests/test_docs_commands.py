"""Run the shell blocks of the docs that are marked ``<!-- doc-test -->``.

The pages run in the order a reader meets them (the site's table of
contents, ``docs/index.md``), each page's marked blocks in order, with
``bash -eo pipefail``, all in ONE scratch folder that links every top-level
entry of the repository (so the commands' relative paths such as
``configs/...`` and ``data/mini`` work and their outputs stay out of the
checkout), with this interpreter first on ``PATH`` as ``python``. A page
that refuses what an earlier one left (a work dir, the mini data) fails
here, not for a reader; so does a page that writes into the repository
root. The blocks are cheap by design (a few iterations on the mini data);
the timeout is their budget.
"""
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MARKER = '<!-- doc-test -->'
BUDGET_S = 240  # per page, a guard against a hanging command
SKIP = {'.git', '.venv', 'data', 'work_dirs', '.pytest_cache', 'build'}


MARKER_LINE = re.compile('^' + re.escape(MARKER) + '$', re.M)


def marked_blocks(text):
    """The bodies of the fenced blocks that follow a marker line."""
    return re.findall('^' + re.escape(MARKER) +
                      r'\n```(?:bash|shell|sh)\n(.*?)\n```', text, re.S | re.M)


def reading_order(index=REPO / 'docs' / 'index.md'):
    """The pages of the site's ``{toctree}`` blocks, in order, as paths
    relative to the repository."""
    pages = []
    for block in re.findall(r'^```\{toctree\}\n(.*?)^```', index.read_text(),
                            re.S | re.M):
        pages += [f'docs/{line.strip()}.md' for line in block.splitlines()
                  if line.strip() and not line.startswith(':')]
    return pages


PAGES = [page for page in reading_order()
         if MARKER_LINE.search((REPO / page).read_text())]


def test_marker_finds_blocks():
    text = f'a\n{MARKER}\n```bash\necho 1\necho 2\n```\n```bash\nno\n```\n'
    assert marked_blocks(text) == ['echo 1\necho 2']
    # every marker is followed by a block it recognises
    for page in PAGES:
        text = (REPO / page).read_text()
        assert len(marked_blocks(text)) == len(MARKER_LINE.findall(text)), page
    assert len(PAGES) >= 5


def test_every_marked_page_is_in_the_reading_order():
    marked = {str(p.relative_to(REPO)) for p in (REPO / 'docs').rglob('*.md')
              if '_build' not in p.parts and MARKER_LINE.search(p.read_text())}
    assert marked == set(PAGES), sorted(marked ^ set(PAGES))
    assert PAGES.index('docs/get_started/data.md') < PAGES.index(
        'docs/user_guides/pretrain.md') < PAGES.index(
        'docs/user_guides/transfer.md')


def _mini_data_parser():
    from conftest import load_tool
    tool = load_tool('make_mini_data', 'misc')
    return lambda argv: tool.parse_args(argv)[1]


def _asked(args):
    from mmpos_harness.mini_data import requested
    return {name: requested(name, args.num_train, args.num_val,
                            args.num_unlabeled, args.img_size, args.seed)
            for name in args.which}


def test_guides_ask_for_the_demos_mini_data(monkeypatch, tmp_path):
    """Every mini-data command on a page asks for the sets that ``make
    demo`` writes with the demo's arguments, so that after the demo it is a
    no-op (the generator refuses other arguments without ``--force``)."""
    from mmpos_harness.comparison import runs
    parse = _mini_data_parser()
    commands = []
    monkeypatch.setattr(runs, 'run', lambda cmd: commands.append(cmd))
    runs.ensure_data(str(tmp_path))  # empty: every set is asked for
    demo = {k: v for cmd in commands for k, v in _asked(parse(cmd[2:])).items()}
    assert {'unlabeled', 'cls', 'objects', 'stuff'} <= set(demo)
    checked = 0
    for page in sorted((REPO / 'docs').rglob('*.md')):
        for line in page.read_text().splitlines():
            if not line.startswith('python tools/misc/make_mini_data.py '):
                continue
            argv = shlex.split(line.split('#')[0])[2:]
            for name, asked in _asked(parse(argv)).items():
                if name in demo:
                    checked += 1
                    assert asked == demo[name], (
                        f'{page.relative_to(REPO)}: {line}\n{name}: {asked} '
                        f'!= the demo\'s {demo[name]}')
    assert checked >= 8


@pytest.mark.slow
def test_guides_run_in_reading_order(tmp_path):
    for entry in REPO.iterdir():
        if entry.name not in SKIP:
            (tmp_path / entry.name).symlink_to(entry)
    before = set(os.listdir(tmp_path))
    # the interpreter's own folder first: `python` is this venv's
    bindir = Path(sys.executable).parent
    env = dict(os.environ, PATH=f'{bindir}{os.pathsep}{os.environ["PATH"]}',
               PYTHONPATH=str(REPO), OMP_NUM_THREADS='1', MKL_NUM_THREADS='1')
    for page in PAGES:
        for block in marked_blocks((REPO / page).read_text()):
            proc = subprocess.run(['bash', '-eo', 'pipefail', '-c', block],
                                  cwd=tmp_path, env=env, capture_output=True,
                                  text=True, timeout=BUDGET_S)
            assert proc.returncode == 0, (
                f'{page} (after {PAGES[:PAGES.index(page)]}): a marked '
                f'command failed:\n{block}\n'
                f'{(proc.stdout + proc.stderr)[-3000:]}')
        new = set(os.listdir(tmp_path)) - before - {'data', 'work_dirs'}
        assert not new, f'{page} wrote {sorted(new)} into the repository root'
