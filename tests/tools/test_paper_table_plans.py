"""docs/user_guides/paper_table_plans.md is what ``tools/paper_tables/run.py
--page`` writes: one table (cr2pq_t2: a CR2PQ ViT-S pretraining and its
UperNet) regenerated and compared with the committed page, whose sections
are manifest tables in the manifest's order, each with its totals row."""
import re

import pytest

from conftest import REPO, load_tool
from mmpos_harness.paper_tables.manifest import load_manifest

PAGE = REPO / 'docs' / 'user_guides' / 'paper_table_plans.md'
#: the table regenerated: two configs, planned in about 20 CPU s
TABLE = 'cr2pq_t2'


def _section(text: str, heading: str) -> str:
    """From ``heading`` to the next ``## `` heading."""
    start = text.index(heading)
    end = text.find('\n## ', start + 1)
    return text[start:] if end < 0 else text[start:end]


@pytest.fixture(scope='module')
def manifest():
    return load_manifest(str(REPO / 'tools/paper_tables/manifest.yaml'))


@pytest.fixture(scope='module')
def committed():
    return PAGE.read_text()


def test_page_sections_are_manifest_tables(manifest, committed):
    shown = re.findall(r'^## (\S+): ', committed, re.M)
    assert TABLE in shown
    assert shown == [t.id for t in manifest.tables if t.id in shown]
    totals = _section(committed, '## Totals')
    assert re.findall(r'^\| (\w+) \| ', totals, re.M) == ['table'] + shown


def test_page_is_what_the_generator_writes(manifest, committed):
    tool = load_tool('run', 'paper_tables')
    cache = {}
    fresh = tool.page(manifest, [manifest.table(TABLE)], cache)
    assert len(cache) == 2 and not any(isinstance(p, str)
                                       for p in cache.values())
    # the head (MFU assumed, the FSDP caveat), the table's section, its
    # totals row and its configs' plans
    assert fresh.split('## Totals')[0] == committed.split('## Totals')[0]
    assert _section(fresh, f'## {TABLE}: ') == _section(
        committed, f'## {TABLE}: ')
    lines = set(committed.splitlines())
    assert next(line for line in fresh.splitlines()
                if line.startswith(f'| {TABLE} | ')) in lines
    plans = [line for line in _section(fresh, '## The plans').splitlines()
             if line.startswith('| `')]
    assert len(plans) == 2 and set(plans) <= lines
