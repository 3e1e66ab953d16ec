"""Judging a design's families on a runner's summary
(mmpos_harness.design.judge, tools/misc/judge_design.py): every p, adjusted
p and equivalence p equals scipy's / statsmodels' on the same per-run
values; an above-margin verdict is the correction's rejection and the
interval shown agrees with it; fewer than 2 runs is no test; a summary
without an arm or task is refused in one line naming the file and key; the
stored ranking summary is judged end to end by designs/probes.yaml and the
demo's confirmation reproduces the demo's own verdicts."""
import json
import os.path as osp
import statistics

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.weightstats import ttost_ind

from conftest import load_tool

from mmpos.errors import BadInputError
from mmpos_harness import design

ROOT = design.ROOT
RANKING = osp.join(ROOT, 'results/method_ranking/summary.json')
DEMO = osp.join(ROOT, 'results/demo_confirm/summary.json')
KEY = 'mIoU'


def _groups(rng, mean, runs, seeds=3, sd_run=1.0, sd_seed=0.5):
    """``[[y per transfer seed] per pretraining run]``."""
    return [list(mean + sd_run * rng.standard_normal() +
                 sd_seed * rng.standard_normal(seeds)) for _ in range(runs)]


def _summary(inits, baselines=None):
    """A comparison summary with pretraining seeds: one task
    (linear-probe), the inits' and the baselines' raw groups."""
    spec = dict(label='mini-stuff linear probe', metrics={KEY: 'mIoU'},
                inits={name: {KEY: dict(groups=g)}
                       for name, g in inits.items()})
    if baselines:
        spec['baselines'] = {name: {KEY: dict(groups=g)}
                             for name, g in baselines.items()}
    runs = max(len(g) for g in inits.values())
    return dict(pretrain_seeds=list(range(runs)), seeds=[0, 1, 2],
                reference='random init', tasks={'linear-probe': spec})


def _design(families, margin=2.0):
    return dict(study='synthetic', alpha=0.05, reference='random',
                margins={'linear-probe': margin}, families=families)


def _means(groups):
    return [statistics.mean(g) for g in groups]


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    inits = {'DropPos': _groups(rng, 30.0, 5), 'MAE': _groups(rng, 21.0, 5),
             'CR2PQ': _groups(rng, 20.5, 4),
             'random init': _groups(rng, 20.0, 5)}
    pixels = [list(17.0 + 0.8 * rng.standard_normal(3))]
    return _summary(inits, {'raw pixels': pixels, 'image-free': [[5.6]]})


ARMS = (('droppos', 'DropPos'), ('mae', 'MAE'), ('cr2pq', 'CR2PQ'))


@pytest.mark.parametrize('correction, peer', [('holm', 'holm'),
                                              ('bh', 'fdr_bh')])
def test_difference_is_scipys_welch_adjusted_as_statsmodels(
        data, correction, peer):
    tests = [[arm, 'linear-probe'] for arm, _ in ARMS] + [
        ['droppos', 'linear-probe', 'mae']]
    rows = design.judge(_design({'f': dict(correction=correction,
                                           tests=tests)}), data)
    inits = data['tasks']['linear-probe']['inits']
    pairs = [(name, 'random init') for _, name in ARMS] + [('DropPos', 'MAE')]
    peers = [sps.ttest_ind(_means(inits[a][KEY]['groups']),
                           _means(inits[b][KEY]['groups']), equal_var=False)
             for a, b in pairs]
    p = [r.pvalue for r in peers]
    assert [r.pvalue for r in rows] == pytest.approx(p, rel=1e-9)
    assert [r.p_adj for r in rows] == pytest.approx(
        multipletests(p, method=peer)[1], rel=1e-9)
    assert [r.verdict for r in rows] == [
        ('higher' if d > 0 else 'lower') if q < 0.05 else 'no verdict'
        for d, q in zip([r.difference for r in rows],
                        multipletests(p, method=peer)[1])]
    assert rows[0].verdict == 'higher' and rows[0].confidence == 0.95


def test_equivalence_is_statsmodels_tost_adjusted_within_the_family(data):
    tests = [[arm, 'linear-probe'] for arm, _ in ARMS]
    rows = design.judge(_design({'eq': dict(
        correction='holm', kind='equivalence', tests=tests)}, margin=3.0),
        data)
    inits = data['tasks']['linear-probe']['inits']
    ref = _means(inits['random init'][KEY]['groups'])
    p = [ttost_ind(_means(inits[name][KEY]['groups']), ref, -3.0, 3.0,
                   usevar='unequal')[0] for _, name in ARMS]
    assert [r.pvalue for r in rows] == pytest.approx(p, rel=1e-9)
    adjusted = multipletests(p, method='holm')[1]
    assert [r.p_adj for r in rows] == pytest.approx(adjusted, rel=1e-9)
    assert [r.verdict for r in rows] == [
        'equivalent' if q < 0.05 else 'no verdict' for q in adjusted]
    assert rows[0].verdict == 'no verdict'  # DropPos is 10 above
    assert all(r.margin == 3.0 and r.confidence == 0.9 for r in rows)


def test_above_margin_is_the_one_sided_test_the_correction_rejects(data):
    """DropPos is about 10 above random init and 13 above raw pixels, far
    above the margin 2; MAE about 1 above random init: not above it."""
    tests = [[arm, 'linear-probe'] for arm, _ in ARMS] + [
        [arm, 'linear-probe', base] for arm, _ in ARMS
        for base in ('pixels', 'image-free')]
    rows = design.judge(_design({'probes': dict(
        correction='holm', kind='above_margin', tests=tests)}), data)
    task = data['tasks']['linear-probe']
    pixels = task['baselines']['raw pixels'][KEY]['groups'][0]
    ref = _means(task['inits']['random init'][KEY]['groups'])
    p = []
    for row in rows:
        arm = _means(task['inits'][dict(ARMS)[row.arm]][KEY]['groups'])
        if row.other == 'image-free':  # one value: one-sample t
            assert row.method == 'one-sample t' and row.n_b == 1
            peer = sps.ttest_1samp(arm, 5.6 + 2.0, alternative='greater')
        else:  # Welch, the other side shifted by the margin
            other = pixels if row.other == 'pixels' else ref
            assert row.method == 'welch' and row.n_b == len(other)
            peer = sps.ttest_ind(arm, np.array(other) + 2.0, equal_var=False,
                                 alternative='greater')
        p.append(peer.pvalue)
    assert [r.pvalue for r in rows] == pytest.approx(p, rel=1e-9)
    reject, adjusted, _, _ = multipletests(p, method='holm')
    assert [r.p_adj for r in rows] == pytest.approx(adjusted, rel=1e-9)
    verdicts = {(r.arm, r.other): r.verdict for r in rows}
    assert verdicts['droppos', 'random'] == 'above margin'
    assert verdicts['droppos', 'pixels'] == 'above margin'
    assert verdicts['mae', 'random'] == 'no verdict'
    assert [r.verdict == 'above margin' for r in rows] == list(reject)
    # the interval agrees with the verdict: its lower end clears the margin
    # exactly when the test is rejected, at its Holm step's level
    order = np.argsort(p, kind='stable')
    for step, i in enumerate(order, 1):
        row = rows[i]
        assert (row.low > row.margin) == reject[i]
        if reject[i]:
            assert row.confidence == pytest.approx(
                1 - 2 * 0.05 / (len(p) - step + 1))
        assert row.high - row.difference == pytest.approx(
            row.difference - row.low)


def test_fewer_than_two_runs_is_no_test_and_leaves_the_family(data):
    task = data['tasks']['linear-probe']
    # ICPF: one complete pretraining run (the other's transfer seed failed)
    groups = task['inits']['DropPos'][KEY]['groups']
    task['inits']['ICPF'] = {KEY: dict(groups=[groups[0],
                                               groups[1][:2] + [None]])}
    tests = [['icpf', 'linear-probe'], ['droppos', 'linear-probe'],
             ['icpf', 'linear-probe', 'image-free']]
    for kind in ('difference', 'equivalence', 'above_margin'):
        rows = design.judge(_design({'f': dict(
            correction='holm', kind=kind, tests=tests)}), data)
        for row in (rows[0], rows[2]):
            assert row.verdict == 'no test' and row.p_adj is None
            assert row.low is None and 'fewer than 2' in row.reason
        # the family has one test left: its p unadjusted
        assert rows[1].p_adj == rows[1].pvalue


@pytest.mark.parametrize('test, key', [
    (['dinov2', 'linear-probe'], "tasks.linear-probe.inits.'DINOv2'"),
    (['droppos', 'knn'], 'tasks.knn with metrics and inits'),
    (['droppos', 'linear-probe', 'image-free'],
     "tasks.linear-probe.baselines.'image-free'"),
])
def test_a_summary_without_the_test_is_one_line_naming_file_and_key(
        data, test, key):
    del data['tasks']['linear-probe']['baselines']['image-free']
    with pytest.raises(BadInputError) as err:
        design.judge(_design({'f': dict(correction='holm', tests=[test])}),
                     data, 'run/summary.json')
    message = str(err.value)
    assert message.startswith(f'run/summary.json: no {key}')
    assert 'family f' in message and '\n' not in message


def test_the_stored_ranking_summary_is_judged_by_the_probes_design():
    """End to end on the stored ranking (the old probes' numbers: only the
    structure and one cell recomputed with scipy are asserted)."""
    found = design.load(osp.join(ROOT, 'designs/probes.yaml'))
    rows = design.judge(found, design.read_summary(RANKING), RANKING)
    tests = found['families']['probes']['tests']
    assert [[r.arm, r.task] + ([r.other] if r.other != 'random' else [])
            for r in rows] == tests
    assert {r.verdict for r in rows} <= {'above margin', 'no verdict'}
    with open(RANKING) as f:
        task = json.load(f)['tasks']['linear-probe']
    arm = _means(task['inits']['DropPos'][KEY]['groups'])
    pixels = task['baselines']['raw pixels'][KEY]['groups'][0]
    margin = found['margins']['linear-probe']
    peer = sps.ttest_ind(arm, np.array(pixels) + margin, equal_var=False,
                         alternative='greater')
    assert rows[0].difference == pytest.approx(
        np.mean(arm) - np.mean(pixels))
    assert rows[0].pvalue == pytest.approx(peer.pvalue, rel=1e-9)
    reject, adjusted, _, _ = multipletests([r.pvalue for r in rows],
                                           method='holm')
    assert [r.p_adj for r in rows] == pytest.approx(adjusted, rel=1e-9)
    assert [r.verdict == 'above margin' for r in rows] == list(reject)
    assert [r.low > r.margin for r in rows] == list(reject)


def test_the_demo_confirmation_reproduces_the_demos_own_verdicts():
    """designs/demo_confirm.yaml's family is the demo table's (Welch on the
    per-pretraining-run values, Holm over its two tasks,
    mmpos_harness.comparison.seeds): judging it gives the stored cells."""
    found = design.load(osp.join(ROOT, 'designs/demo_confirm.yaml'))
    summary = design.read_summary(DEMO)
    rows = design.judge(found, summary, DEMO)
    for row in rows:
        stored = summary['tasks'][row.task]['inits']['DropPos']
        stored = next(iter(stored.values()))['test']
        assert row.p_adj == pytest.approx(stored['p_adj'], rel=1e-12)
        assert (row.difference, row.low, row.high, row.verdict) == \
            pytest.approx((stored['difference'], stored['low'],
                           stored['high'], stored['verdict']))


def test_the_tool_prints_a_table_per_family(tmp_path, capsys):
    judge_design = load_tool('judge_design', 'misc')
    out = tmp_path / 'judged.md'
    judge_design.main([osp.join(ROOT, 'designs/demo_confirm.yaml'), DEMO,
                       '--out', str(out)])
    text = capsys.readouterr().out
    assert out.read_text() == text
    assert text.count('### headline') == 1
    assert '| DropPos − random init, detection (welch) | - |' in text
    for argv, what in (
            ([osp.join(ROOT, 'designs/probes.yaml'), DEMO],
             'no tasks.linear-probe'),
            ([osp.join(ROOT, 'designs/demo_confirm.yaml'), DEMO, '--out',
              osp.join(ROOT, 'docs/judged.md')], 'under docs/'),
            ([osp.join(ROOT, 'designs/demo_confirm.yaml'), DEMO, '--out',
              str(out)], 'exists')):
        with pytest.raises(SystemExit) as err:
            judge_design.main(argv)
        line = str(err.value.code)  # cli_main: one line, status 1
        assert line.startswith('judge_design.py: error: ') and what in line
        assert '\n' not in line
