"""Numbers on pages come from committed result files, and a page marks the
ones whose code computes something else now.

Every provenance record in a result file (``mmpos_harness.provenance``: a
dict with ``commit`` and ``depends``) carries a behavioural fingerprint
(``mmpos_harness.fingerprint``) of the probes its ``depends`` call for;
``results/status.json`` lists exactly the results that are stale now (a
probe gives other outputs, or a file no probe reaches changed since the
record's commit), and the pages mark those
(``python tools/misc/results_status.py --write``). The README's demo
table must be what ``mmpos_harness.demo_table.readme_block`` renders from
the stored result files (re-run ``python tools/demo.py``, then
``python tools/paper_tables/gen_tables.py --demo work_dirs/demo/<run>``).
"""
import functools
import importlib
import importlib.util
import itertools
import json
import sys
import warnings
from pathlib import Path

import pytest

from mmpos_harness import (demo, demo_table, dense_probes, fingerprint,
                           method_ranking, position_study, provenance)
from mmpos_harness.comparison import seeds

REPO = Path(__file__).resolve().parents[1]
RESULT_FILES = [Path(p) for p in fingerprint.result_files()]
RECORDS = [(Path(path), record)
           for path, record in fingerprint.stored_records()]
# Results measured before records existed, each with what regenerates it:
# a result is a folder under results/ or a file there or in
# benchmarks/results/. The list only shrinks; a new result has a record.
_BENCHMARK = 'its `python benchmarks/run.py` command (settings.argv)'
LEGACY = {
    **{f'benchmarks/results/{name}.json': _BENCHMARK for name in (
        'h100_80gb_hbm3_rope_attention', 'rope_attention_h100')},
}


def _result(path: Path) -> str:
    """The result ``path`` belongs to (module comment above LEGACY)."""
    return fingerprint.result_of(str(path.relative_to(REPO)))


def test_the_demo_result_records_its_provenance():
    assert any(str(path).startswith(demo_table.RESULTS) for path, _ in RECORDS)


def test_every_result_records_its_provenance_or_is_listed_legacy():
    results = {_result(path) for path in RESULT_FILES}
    recorded = {_result(REPO / path) for path, _ in RECORDS}
    without = results - recorded
    assert not without - set(LEGACY), (
        f'results without a provenance record: {sorted(without - set(LEGACY))}'
        ': write one with mmpos_harness.provenance.record')
    assert not set(LEGACY) - without, (
        f'listed as legacy but now recorded or gone, remove from LEGACY: '
        f'{sorted(set(LEGACY) - without)}')


def test_no_result_ran_with_uncommitted_changes():
    dirty = {str(path): record['dirty'] for path, record in RECORDS
             if record['dirty']}
    assert not dirty, f'measured with uncommitted changes: {dirty}'


def test_every_record_has_the_fingerprint_its_depends_call_for():
    """Each record names a stored fingerprint holding exactly the probes
    of its ``depends`` (``fingerprint.record_probes``: the schemes that
    existed at its commit); a stale result, marked
    in ``results/status.json``, keeps the fingerprint it was measured with
    (a probe added since cannot speak for code that changed)."""
    wrong, marks = {}, fingerprint.read_marks()
    for path, record in RECORDS:
        if fingerprint.result_of(str(path)) in marks:
            continue
        if 'fingerprint' not in record:
            wrong[str(path)] = 'no fingerprint'
            continue
        stored = set(fingerprint.load(record['fingerprint'])['probes'])
        wanted = set(fingerprint.record_probes(record))
        if stored != wanted:
            wrong[str(path)] = sorted(stored ^ wanted)[:3]
    assert not wrong, (
        f'records without the fingerprint of their depends: '
        f'{dict(list(wrong.items())[:5])} ({len(wrong)} in all): python '
        'tools/misc/results_status.py --refingerprint')


def test_the_pages_mark_exactly_the_stale_results():
    """``results/status.json`` (which the pages' marks come from) lists
    the results that are stale now, each with the commit it was measured
    at: a stale number without its mark, or a mark on a current one,
    fails."""
    status = fingerprint.results_status()
    unknown = {r: e['reasons'] for r, e in status.items()
               if e['state'] == 'unknown' and not e.get('elsewhere')}
    if unknown and provenance.shallow():
        pytest.skip(f'a shallow clone has no history to compare: {unknown}')
    assert not unknown, f'results whose status is unknown: {unknown}'
    elsewhere = sorted(r for r, e in status.items() if e.get('elsewhere'))
    if elsewhere:  # judged on the machine that fingerprinted them
        warnings.warn(f'{len(elsewhere)} results fingerprinted on another '
                      f'CPU or torch are not judged here: {elsewhere}')
    stored = fingerprint.read_marks()
    assert fingerprint.stale_marks(status, stored) == stored, (
        f'{fingerprint.STATUS} is not what the results show now: python '
        'tools/misc/results_status.py --write (stale: '
        f'{ {r: e["reasons"][:2] for r, e in status.items() if e["state"] == "stale"} })')


def _producer_depends(path, record):
    """The ``depends`` that the command which wrote ``record`` gives
    :func:`~mmpos_harness.provenance.record` now, or None for a command
    without a producer here."""
    command = record['command']
    if 'method_ranking.py' in command:
        return method_ranking.depends()
    if 'tools/demo.py' in command:
        return demo.depends()
    if 'dense_probes.py' in command:
        return dense_probes.depends()
    if 'position_study.py' in command:
        words = command.split()
        names = (list(itertools.takewhile(
            lambda w: not w.startswith('--'),
            words[words.index('--schemes') + 1:])) if '--schemes' in words
            else list(position_study.DEFAULT_SCHEMES))
        if path.parent.parent.name == 'runs':  # runs/<scheme>/seed<k>.json
            names = [path.parent.name]
        return position_study.code(names)
    if 'benchmarks/run.py' in command:
        sys.path.insert(0, str(REPO / 'benchmarks'))
        try:
            bench = importlib.import_module('run')
        finally:
            sys.path.remove(str(REPO / 'benchmarks'))
        return bench.depends([n for n, m in bench.BENCHMARKS.items()
                              if f'benchmarks/{m}.py' in record['depends']])
    return None


def test_every_record_depends_on_what_its_command_reads_now():
    """A record's ``depends`` cover (as files) what its command's producer
    lists now as ``mmpos_harness.provenance.resolve`` completes it: a
    record cannot leave out a file its result runs through (that existed
    when it ran: code moved since is judged by the fingerprint's probes)."""
    files = functools.lru_cache(None)(lambda paths: {
        f for p in paths for f in provenance.files_under(p)})
    existed = functools.lru_cache(None)(lambda commit: set(
        provenance._git('ls-tree', '-r', '--name-only', commit).splitlines()))

    @functools.lru_cache(None)
    def wanted_files(path, command, depends):
        paths = _producer_depends(path, dict(command=command,
                                             depends=list(depends)))
        return None if paths is None else files(
            tuple(provenance.resolve(paths)))

    missing = {}
    for path, record in RECORDS:
        key = path if 'position_study' in record['command'] else None
        wanted = wanted_files(key, record['command'],
                              tuple(record['depends']))
        if wanted is None:
            continue
        left_out = (wanted - files(tuple(record['depends']))) & existed(
            record['commit'])
        if left_out:
            missing[str(path)] = sorted(left_out)[:3]
    assert not missing, f'records leaving out what they run through: {missing}'


def test_readme_demo_table_is_the_stored_result():
    text = (REPO / demo_table.README).read_text()
    block = text.split(demo_table.BEGIN)[1].split(demo_table.END)[0]
    assert block == '\n' + demo_table.readme_block(str(REPO / demo_table.RESULTS)), (
        'README.md\'s demo table differs from results/demo/: '
        'python tools/paper_tables/gen_tables.py --demo <run dir> regenerates it')


def test_demo_page_confirmation_is_the_stored_result():
    """The demo page's confirmation on fresh seeds is what
    ``results/demo_confirm/`` renders, under the design it tests."""
    text = (REPO / demo_table.PAGE).read_text()
    block = text.split(demo_table.CONFIRM_BEGIN)[1].split(
        demo_table.CONFIRM_END)[0]
    assert block == '\n' + demo_table.confirm_block(
        str(REPO / demo_table.CONFIRM)), (
        f'{demo_table.PAGE}\'s confirmation differs from '
        f'{demo_table.CONFIRM}/: python tools/paper_tables/gen_tables.py '
        '--demo-confirm <run dir> regenerates it')


# stored seed comparisons (gen_tables.py --seeds): every table file beside
# a summary.json, outside LEGACY
SUMMARIES = sorted(p for p in REPO.glob('results/*/summary.json')
                   if _result(p) not in LEGACY)


def test_the_demo_is_a_stored_seed_comparison():
    assert REPO / demo_table.RESULTS / 'summary.json' in SUMMARIES


@pytest.mark.parametrize('summary', SUMMARIES,
                         ids=[str(p.parent.relative_to(REPO))
                              for p in SUMMARIES])
def test_stored_seed_tables_regenerate_from_their_summary(summary, tmp_path):
    """``seeds.md``, ``seeds.csv`` and ``orderings.md`` are what
    ``gen_tables.py --seeds <summary.json>`` writes from the stored
    per-seed values, byte for byte."""
    seeds.write(seeds.load(str(summary)), str(tmp_path))
    for name in ('seeds.md', 'seeds.csv', 'orderings.md'):
        stored = summary.parent / name
        assert stored.is_file() == (tmp_path / name).is_file(), name
        if stored.is_file():
            assert stored.read_bytes() == (tmp_path / name).read_bytes(), (
                f'{stored.relative_to(REPO)} differs from what '
                f'gen_tables.py --seeds {summary.relative_to(REPO)} writes')


def test_stored_tuning_table_regenerates_from_its_log():
    """The method ranking's ``tuning.md`` is what the tuning renders from
    the stored ``tuning.json``."""
    from mmpos_harness import method_ranking
    stored = REPO / 'results/method_ranking_tuning'
    log = json.loads((stored / method_ranking.TUNING).read_text())
    assert (stored / 'tuning.md').read_text() == \
        method_ranking.tuning_markdown(log)


def test_dense_probe_table_is_the_stored_result():
    """The frozen-evaluation page's dense-probe table is what
    ``dense_probe_suite.py`` renders from the stored values, with the
    stored run's provenance line."""
    stored = REPO / dense_probes.RESULTS
    results = json.loads((stored / 'results.json').read_text())
    spec = importlib.util.spec_from_file_location(
        'dense_probe_suite', REPO / dense_probes.SUITE)
    suite = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(suite)
    text = suite.markdown(results['results'], results['seeds'])
    assert (stored / 'suite.md').read_text() == text.strip() + '\n'
    assert (stored / 'result.md').read_text() == dense_probes.page_table(
        results, text.strip() + '\n'), (
        f'{stored}/result.md differs from its results.json: python '
        'tools/paper_tables/dense_probes.py --publish <run dir>')


def test_position_study_tables_are_the_stored_result():
    """The resolution study's stored tables (which the positions page
    includes) are what ``position_study.markdown`` renders from the stored
    per-seed values, their tests recomputed (``analyse``), and hold every
    stored run."""
    import copy

    from mmpos_harness import position_study
    stored = REPO / 'results/position_study'
    summary = json.loads((stored / 'position_study.json').read_text())
    fresh = copy.deepcopy(summary)
    for table in fresh['tables'].values():
        position_study.analyse(table)
    assert (stored / 'position_study.md').read_text() == \
        position_study.markdown(fresh), (
            f'{stored}/position_study.md differs from its json: python '
            'tools/paper_tables/position_study.py --retable '
            f'{stored}/position_study.json')
    runs = sorted((stored / 'runs').glob('*/seed*.json'))
    assert summary['num_runs'] == len(runs)
    train = str(summary['train_size'])
    for path in runs:  # runs/<scheme>/seed<k>.json
        seed = int(path.stem.removeprefix('seed'))
        cell = summary['tables']['resize']['rows'][path.parent.name][train]
        assert cell['values'][summary['seeds'].index(seed)] == json.loads(
            path.read_text())['resize'][train]
    page = (REPO / 'docs/positions.md').read_text()
    assert '```{include} ../results/position_study/position_study.md' \
        in page
