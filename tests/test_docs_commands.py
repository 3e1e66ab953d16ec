"""Run the shell blocks of the docs that are marked ``<!-- doc-test -->``.

Each page's marked blocks run in order, with ``bash -eo pipefail``, in a
scratch folder that links every top-level entry of the repository (so the
commands' relative paths such as ``configs/...`` and ``data/mini`` work and
their outputs stay out of the checkout), with this interpreter first on
``PATH`` as ``python``. A renamed tool, option or config breaks this test,
not a reader. The blocks are cheap by design (a few iterations on the mini
data); the timeout is their budget.
"""
import os
import re
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


PAGES = sorted(
    str(p.relative_to(REPO)) for p in (REPO / 'docs').rglob('*.md')
    if '_build' not in p.parts and MARKER_LINE.search(p.read_text()))


def test_marker_finds_blocks():
    text = f'a\n{MARKER}\n```bash\necho 1\necho 2\n```\n```bash\nno\n```\n'
    assert marked_blocks(text) == ['echo 1\necho 2']
    # every marker is followed by a block it recognises
    for page in PAGES:
        text = (REPO / page).read_text()
        assert len(marked_blocks(text)) == len(MARKER_LINE.findall(text)), page
    assert len(PAGES) >= 5


@pytest.mark.slow
@pytest.mark.parametrize('page', PAGES)
def test_marked_commands_run(page, tmp_path):
    for entry in REPO.iterdir():
        if entry.name not in SKIP:
            (tmp_path / entry.name).symlink_to(entry)
    # the interpreter's own folder first: `python` is this venv's
    bindir = Path(sys.executable).parent
    env = dict(os.environ, PATH=f'{bindir}{os.pathsep}{os.environ["PATH"]}',
               PYTHONPATH=str(REPO), OMP_NUM_THREADS='1', MKL_NUM_THREADS='1')
    for block in marked_blocks((REPO / page).read_text()):
        proc = subprocess.run(['bash', '-eo', 'pipefail', '-c', block],
                              cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=BUDGET_S)
        assert proc.returncode == 0, (
            f'{page}: a marked command failed:\n{block}\n'
            f'{(proc.stdout + proc.stderr)[-3000:]}')
