"""The replicate runner (``benchmarks/replicates.py``) and its benchmark
designs (``designs/benchmarks/``): the committed design says what its
benchmark module measures, every arm gets at least 10 processes in one
shuffled order with a pause between two, a run records its design, and a
bad design or an existing result is refused in one line. Nothing is timed
here: the runs are stand-ins (one tiny run.py process checks the design is
recorded)."""
import importlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from mmpos.errors import BadInputError

REPO = Path(__file__).resolve().parents[1]
DESIGN = 'designs/benchmarks/cpu_position_schemes.yaml'


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / 'benchmarks'))
    return importlib.import_module


def _without_name(cmd):
    i = cmd.index('--name')
    return cmd[:i] + cmd[i + 2:]


def test_the_committed_design_fixes_what_its_module_measures(bench):
    replicates = bench('replicates')
    schemes = bench('position_schemes')
    design = replicates.load(str(REPO / DESIGN))
    assert design['bounds'] == schemes.TARGETS
    assert design['estimand']['grid'] == list(schemes.GRID)
    assert design['replicates'] >= 10 and design['pause_s'] > 0
    assert design['confirm'] in design['arms']
    runs = replicates.schedule(design)
    assert sorted(runs) == sorted((arm, k) for arm in design['arms']
                                  for k in range(1, 11))
    assert runs == replicates.schedule(design)  # the seed fixes the order
    # shuffled: the arms interleave, not one after the other
    arms = [arm for arm, _ in runs]
    assert arms != sorted(arms) and arms != sorted(arms, reverse=True)
    # the runs of an arm are one command but for --name (one row between
    # runs), with the design's settings and the arm's allocator
    for arm in design['arms']:
        commands = {tuple(_without_name(replicates.command(
            design, DESIGN, a, k))) for a, k in runs if a == arm}
        (cmd, ) = commands
        assert cmd[cmd.index('--malloc') + 1] == arm
        assert cmd[cmd.index('--design') + 1] == DESIGN
        for key, option in (('threads', '--threads'), ('iters', '--iters'),
                            ('batch_size', '--batch-size')):
            assert cmd[cmd.index(option) + 1] == str(
                design['estimand'][key])


def _write(tmp_path, **changes):
    design = yaml.safe_load((REPO / DESIGN).read_text())
    for key, value in changes.items():
        if '.' in key:
            outer, inner = key.split('.')
            design[outer][inner] = value
        else:
            design[key] = value
    path = tmp_path / 'cpu_position_schemes.yaml'
    path.write_text(yaml.safe_dump(design))
    return str(path)


@pytest.mark.parametrize('changes, message', [
    (dict(replicates=6), 'replicates must be an integer >= 10'),
    (dict(bounds={'liere': '<= 2'}), 'bounds'),
    (dict(**{'estimand.width': 768}), 'estimand.width is 768'),
    (dict(**{'estimand.depth': 2}), 'estimand.depth: neither'),
    (dict(confirm='jemalloc'), "confirm 'jemalloc'"),
    (dict(only='nope'), "only 'nope'"),
    (dict(pause='90'), "unknown key 'pause'"),
])
def test_a_bad_design_is_refused_naming_its_key(bench, tmp_path, changes,
                                                message):
    with pytest.raises(BadInputError, match=message):
        bench('replicates').load(_write(tmp_path, **changes))


def test_runs_in_the_shuffled_order_with_pauses_and_refuses_overwriting(
        bench, tmp_path):
    """Every run of the committed design in the schedule's order, each a
    process (a stand-in here) and ``pause_s`` between two; a folder already
    holding one of its runs is refused; an uncommitted design too."""
    replicates = bench('replicates')
    design = replicates.load(str(REPO / DESIGN))
    executed, slept, log = [], [], []
    failed = replicates.run(str(REPO / DESIGN), str(tmp_path),
                            execute=lambda cmd: executed.append(cmd) or 0,
                            sleep=slept.append, log=log.append)
    assert failed == 0
    assert [(c[c.index('--malloc') + 1],
             int(c[c.index('--name') + 1].rsplit('_r', 1)[1]))
            for c in executed] == replicates.schedule(design)
    assert slept == [design['pause_s']] * (len(executed) - 1)
    assert all(c[-2:] == ['--out', str(tmp_path)] for c in executed)
    # a stored run is not overwritten
    arm, k = replicates.schedule(design)[3]
    (tmp_path / f'{replicates.run_name(design, arm, k)}.json').write_text('{}')
    with pytest.raises(BadInputError, match='exists'):
        replicates.run(str(REPO / DESIGN), str(tmp_path), execute=None)
    # the dry run only prints the order (and a copy outside git may too)
    copy = tmp_path / 'copy' / 'cpu_position_schemes.yaml'
    copy.parent.mkdir()
    shutil.copy(REPO / DESIGN, copy)
    printed = []
    assert replicates.run(str(copy), str(tmp_path / 'copy'), dry_run=True,
                          log=printed.append) == 0
    assert len(printed) == 1 + len(executed)
    with pytest.raises(BadInputError, match='commit the design'):
        replicates.run(str(copy), str(tmp_path / 'copy'), execute=None)


def test_a_run_records_its_design(bench, tmp_path):
    """``run.py --design`` keeps the design in the run's settings and its
    provenance's depends; ``--batch-size`` reaches the benchmark."""
    run = bench('run')
    argv = ['--only', 'position_schemes', '--quick', '--iters', '2',
            '--warmup', '0', '--device', 'cpu', '--malloc', 'system',
            '--batch-size', '1', '--design', str(REPO / DESIGN), '--out',
            str(tmp_path), '--name', 'replicate']
    assert run.main(argv) == 0
    settings = json.loads((tmp_path / 'replicate.json').read_text())[
        'settings']
    assert settings['design'] == DESIGN
    assert DESIGN in settings['provenance']['depends']
    result = json.loads((tmp_path / 'replicate.json').read_text())[
        'benchmarks']['position_schemes']['result']
    assert result['settings']['batch_size'] == 1
    with pytest.raises(SystemExit):
        run.main(argv[:-6] + ['--design', str(tmp_path / 'replicate.json'),
                              '--out', str(tmp_path), '--name', 'x'])
